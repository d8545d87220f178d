package server

// The election's shell: every input to the ring state machine (a peer
// message, an undeliverable one, a timer) runs under lmu, what the core
// returns is sent before the lock is released, and its transitions become
// events and role changes (observe).

import (
	"context"
	"time"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/wire"
)

// locked runs f with the election state locked, then publishes what
// changed and re-arms the timer.
func (s *Server) locked(f func()) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if s.stopped.Load() {
		return
	}
	f()
	s.observe()
	s.readAt = time.Time{}
	s.timer.Reset(s.nextWake())
}

// do runs f with the election state locked.
func (s *Server) do(ctx context.Context, f func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.locked(f)
	return nil
}

func (s *Server) tick() {
	if s.node != nil {
		s.send(s.node.Tick(s.now()))
	}
	s.apply(s.role.Tick(s.now()))
}

func (s *Server) onUnreachable(m ring.Message) {
	if s.node != nil {
		s.send(s.node.Unreachable(s.now(), m))
	}
}

func (s *Server) nextWake() time.Duration {
	wake := time.Hour
	now := s.now()
	if s.node != nil {
		if at, ok := s.node.Deadline(); ok {
			wake = at - now
		}
	}
	if at, ok := s.role.Deadline(); ok {
		wake = min(wake, at-now)
	}
	return max(wake, 0)
}

func (s *Server) onMessage(m ring.Message) {
	if s.node == nil {
		return
	}
	if m.Type == wire.MsgHeartbeatAck {
		if addr, ok := s.addrOf(m.From); ok {
			s.role.Heard(s.now(), addr)
		}
		return
	}
	if m.Type == ring.MsgElection && s.cfg.CrashOnElection {
		s.log.Warn("fault injection: crashing on an ELECTION message", "round", m.Round)
		s.cfg.Exit(137)
		return
	}
	if s.node.Ring().Index(m.From) < 0 {
		// Not a member (removed, or from another ring): its election
		// would disturb ours.
		s.m.dropped.Inc()
		return
	}
	s.send(s.node.Step(s.now(), m))
	if m.Type == ring.MsgHeartbeat {
		s.send([]ring.Message{{Type: wire.MsgHeartbeatAck, From: s.self, To: m.From, Cand: m.Cand, Round: m.Round}})
	}
}

func (s *Server) addrOf(u ring.UID) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.meta == nil {
		return "", false
	}
	i := s.node.Ring().Index(u)
	if i < 0 || i >= len(s.meta.Servers) {
		return "", false
	}
	return s.meta.Servers[i], true
}

// send hands out to the transport, the messages that carry an election
// on first and hop acknowledgements last: a write on loopback runs the
// receiver's side of TCP and wakes it before it returns, so an
// acknowledgement written first delayed every hop by a write and a
// wake-up of the predecessor (the core answers an ack first).
func (s *Server) send(out []ring.Message) {
	for _, m := range out {
		if !m.Ack {
			s.sendOne(m)
		}
	}
	for _, m := range out {
		if m.Ack {
			s.hopAcks.Add(1)
			s.m.hopAcks.Inc()
			s.tr.Send(m)
		}
	}
}

func (s *Server) sendOne(m ring.Message) {
	if m.Resent {
		s.resent.Add(1)
		s.m.resent.Inc()
		s.tr.Send(m)
		return
	}
	if m.Type == ring.MsgElection {
		s.mu.Lock()
		if m.Round != s.sentRound {
			s.events.ElectionSent, s.sentRound = time.Now().UnixNano(), m.Round
		}
		s.mu.Unlock()
	}
	s.sent[m.Type].Add(1)
	s.m.sentOf(m.Type).Inc()
	s.tr.Send(m)
	if m.Type == ring.MsgElected && !s.readAt.IsZero() {
		d := time.Since(s.readAt)
		s.mu.Lock()
		s.events.ElectedForward = d.Nanoseconds()
		s.mu.Unlock()
	}
}

func typeName(t ring.MsgType) string {
	if t == wire.MsgHeartbeatAck {
		return "heartbeat_ack"
	}
	return t.String()
}

// observe turns state-machine transitions into events and role changes.
func (s *Server) observe() {
	if s.node == nil {
		return
	}
	st, prev, stats := s.node.Status(), s.last, s.node.Stats()
	now := time.Now().UnixNano()
	// The ELECTED round runs from the read of the winner's own ELECTION
	// to the read of its ELECTED, each back from around the ring — not
	// from after the first ELECTED's write to after the END that the
	// winner then writes to every member, which put n−2 writes (and the
	// wake-ups they cause) into a round of n−1 hops.
	read := now
	if !s.readAt.IsZero() {
		read = s.readAt.UnixNano()
	}
	s.mu.Lock()
	if stats.Initiated > s.seen.Initiated && stats.Restarts == s.seen.Restarts {
		s.events.Suspected = now
	}
	if st.Leader != prev.Leader && !st.Leader.IsZero() {
		s.events.LeaderKnown = now
	}
	if stats.Announced > s.seen.Announced {
		s.events.Announced = read
	}
	// The announcement came back (or had no one to go to): the election
	// ended here. Its announcer is the winner, but for Dolev–Klawe–Rodeh,
	// whose announcer names another.
	if stats.Ended > s.seen.Ended {
		s.events.Won = read
	}
	s.seen = stats
	s.status = st
	s.mu.Unlock()
	s.last = st
	switch {
	case st.Leader == s.self && !st.Announcing && s.role.Round() < st.Round && s.leaseValid():
		// Only with a majority's lease: a minority that elected one of
		// its own would otherwise make metadata of a newer round, which
		// every server prefers once the partition heals, from its stale
		// view of the ring. Without one the winner leads the ring state
		// machine but takes the role over later, if it still leads when a
		// majority confirms it (observe runs at every heartbeat).
		s.takeOver(st.Round)
	case s.role.Active() && st.Leader != s.self:
		s.log.Info("stepping down as coordinator", "round", st.Round)
		s.role.StepDown()
		s.setCoordinatorGauge()
	}
}
