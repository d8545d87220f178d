package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/membership"
	"github.com/ringside/ringside/ring/wire"
)

// The serving lease (ring/lease) on the network. Every heartbeat interval
// the server asks every other member whether it still counts it as one;
// an owner serves reads and writes only while a majority of the ring said
// yes within the lease term (two heartbeats short of the suspect timeout,
// so a server cut off with a minority has stopped before the majority
// side can remove it or elect past it). The answers also say under which metadata the answerer
// last finished moving its data, which the coordinator role's data guard
// needs to know where each arc's data is.

// noLease begins the 503 of an owner without a serving lease.
const noLease = "no majority of the ring has confirmed this server"

// leaseLoop asks for confirmations every heartbeat interval, and at once
// when the membership changed, until ctx ends.
func (s *Server) leaseLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		s.askLease()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.askNow:
		}
	}
}

// askLease asks every other member, over the ring's connections
// (wire.MsgLeaseAsk), whether it counts this server, each ask carrying
// this server's answer to that member's latest ask. Answers come back to
// onLease; one that never comes confirms nothing. Askers it does not ask
// (not members under its metadata, or it has none yet) get their answer
// on its own.
func (s *Server) askLease() {
	meta := s.currentMeta()
	s.leaseMu.Lock()
	pending := s.unanswered
	s.unanswered = make(map[ring.UID]uint64, len(pending))
	var n uint64
	if meta != nil {
		n = s.lease.Ask(s.now())
	}
	s.leaseMu.Unlock()
	if meta != nil {
		for _, addr := range meta.Servers {
			if addr == s.cfg.Addr {
				continue
			}
			to := ring.UIDOf(addr)
			ask := wire.LeaseAsk{Round: n}
			if r, ok := pending[to]; ok {
				ask.Answer, ask.HasAnswer = s.answerLease(to, r), true
				delete(pending, to)
			}
			s.tr.Send(ask.Message(s.self, to))
			s.m.leaseAsks.Inc()
		}
	}
	for to, r := range pending {
		s.sendAnswer(to, r)
	}
}

// onLease handles the serving lease's frames, reporting whether m was
// one. They bypass the election lock: answering takes published state
// only.
func (s *Server) onLease(m ring.Message) bool {
	switch m.Type {
	case wire.MsgLeaseAsk:
		ask, err := wire.ParseLeaseAsk(m)
		if err != nil {
			s.malformedLease(err)
			return true
		}
		if ask.HasAnswer {
			s.leaseAnswered(m.From, ask.Answer)
		}
		if !s.answersRide() {
			s.sendAnswer(m.From, ask.Round)
			return true
		}
		// An ask on one connection follows the asker's previous one:
		// the latest is the round to answer.
		s.leaseMu.Lock()
		s.unanswered[m.From] = ask.Round
		s.leaseMu.Unlock()
	case wire.MsgLeaseAnswer:
		a, err := wire.ParseLeaseAnswer(m)
		if err != nil {
			s.malformedLease(err)
			return true
		}
		s.leaseAnswered(m.From, a)
	default:
		return false
	}
	return true
}

// answersRide reports whether answers wait for the answerer's next ask.
// A round asked at t is then confirmed by about t + one heartbeat, the
// next by t + two, so the lease runs without a gap only when its term is
// longer than two heartbeats; three leave one for a late tick or a loaded
// machine. A shorter term (a suspect timeout under five heartbeats; the
// default is seven) is answered at once, four frames a pair and heartbeat.
func (s *Server) answersRide() bool {
	return s.lease.Term() >= 3*s.cfg.HeartbeatInterval
}

func (s *Server) sendAnswer(to ring.UID, round uint64) {
	s.tr.Send(s.answerLease(to, round).Message(s.self, to))
	s.m.leaseAnswers.Inc()
}

func (s *Server) malformedLease(err error) {
	s.m.malformed.WithLabelValues("peer").Inc()
	s.log.Debug("lease frame", "err", err)
}

// answerLease answers round of asker from: counted when the asker is a
// member under this server's metadata, and either way with this server's
// rebalance report. The transport reaches only members, so a stranger's
// ask goes unanswered, which confirms nothing as well. Counting when the
// answer leaves, up to a heartbeat after the ask, is sound: the asker's
// lease runs from its ask, which reached this server, so a cut that
// isolates the asker came after it however late the answer leaves, and
// the term still ends before the other side may remove the asker.
func (s *Server) answerLease(from ring.UID, round uint64) wire.LeaseAnswer {
	a := wire.LeaseAnswer{Round: round}
	if meta := s.currentMeta(); meta != nil {
		_, a.Counted = meta.AddrOf(from)
	}
	if e, ok := s.rebalancedAt(); ok {
		a.Rebalanced, a.HasRebalanced = [2]uint64{e.Round, e.Version}, true
	}
	return a
}

// leaseAnswered records a member's answer and its rebalance report.
func (s *Server) leaseAnswered(fromUID ring.UID, a wire.LeaseAnswer) {
	meta := s.currentMeta()
	if meta == nil {
		return
	}
	from, ok := meta.AddrOf(fromUID)
	if !ok {
		return // not a member: its answer counts for nothing
	}
	if a.Counted {
		s.leaseMu.Lock()
		s.lease.Confirmed(a.Round, from)
		s.leaseMu.Unlock()
	}
	if a.HasRebalanced {
		s.lmu.Lock()
		s.role.Rebalanced(from, membership.Epoch{Round: a.Rebalanced[0], Version: a.Rebalanced[1]})
		s.lmu.Unlock()
	}
}

// leased reports whether this server may serve as an owner now; when not
// it answers 503 saying why.
func (s *Server) leased(w http.ResponseWriter) bool {
	ok := s.leaseValid()
	if !ok {
		s.m.unleased.Inc()
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("%s within %s (cut off from it?): it does not serve as an owner", noLease, s.lease.Term()),
			http.StatusServiceUnavailable)
	}
	return ok
}

func (s *Server) leaseValid() bool {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	return s.lease.Valid(s.now())
}

// rebalanced records that this server finished moving data for meta.
func (s *Server) rebalanced(meta *membership.Metadata) {
	e := meta.Epoch()
	s.mu.Lock()
	s.rebalancedEpoch, s.hasRebalanced = e, true
	s.mu.Unlock()
	s.lmu.Lock()
	s.role.Rebalanced(s.cfg.Addr, e)
	s.lmu.Unlock()
}

func (s *Server) rebalancedAt() (membership.Epoch, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rebalancedEpoch, s.hasRebalanced
}
