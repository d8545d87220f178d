package sim

import (
	"fmt"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/coordinator"
	"github.com/ringside/ringside/ring/membership"
)

// This file drives the coordinator role (ring/coordinator) in the
// simulator the way ring/server drives it on the network: acks for
// heartbeats, takeover by the election's winner, metadata pushed to every
// member and installed there. A metadata push travels with the same delay
// and loss as a ring message.

func (s *Sim) initRoles() error {
	m := s.cfg.Meta
	order := s.cfg.Ring.Order()
	if len(m.Servers) != len(order) {
		return fmt.Errorf("sim: metadata has %d servers, the ring %d", len(m.Servers), len(order))
	}
	suspect := s.cfg.Node.SuspectTimeout
	if suspect <= 0 {
		suspect = ring.DefaultSuspectTimeout
	}
	s.roles = make([]*coordinator.Coordinator, len(order))
	s.addrs = make([]string, len(order))
	for i, u := range order {
		if ring.UIDOf(m.Servers[i]) != u {
			return fmt.Errorf("sim: ring position %d is not the metadata's %s (with Meta the ring is in UID order)", i, m.Servers[i])
		}
		role, err := coordinator.New(m.Servers[i], suspect)
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		role.Install(0, m)
		s.roles[i], s.addrs[i] = role, m.Servers[i]
	}
	return nil
}

// ack sends member i's heartbeat ack to the coordinator that sent the
// heartbeat.
func (s *Sim) ack(i int, coord ring.UID) {
	s.counts.Acks++
	to := s.cfg.Ring.Index(coord)
	if to < 0 || !s.deliverable(i, to) {
		return
	}
	d := s.cfg.Delay(s.rng, i, to)
	s.push(event{at: s.now + d, kind: evAck, node: int32(to), aux: s.inc[to], msg: ring.Message{From: s.cfg.Ring.Order()[i]}})
}

// deliverable decides the fate of one message from → to: false when it is
// refused (down, partitioned) or lost.
func (s *Sim) deliverable(from, to int) bool { return !s.refused(from, to) && !s.lose() }

// followElection carries a node's election outcome to its role, as the
// server's observe does: the winner of a newer round takes over, a
// coordinator that follows someone else steps down.
func (s *Sim) followElection(i int, st ring.Status) {
	self := s.cfg.Ring.Order()[i]
	role := s.roles[i]
	switch {
	case st.Leader == self && !st.Announcing && role.Round() < st.Round:
		up, err := role.Won(s.now, st.Round)
		s.apply(i, up, err)
	case role.Active() && st.Leader != self:
		role.StepDown()
	}
}

// apply carries out a role's decision at node i: install the new metadata
// there and push it to every other member.
func (s *Sim) apply(i int, up coordinator.Update, err error) {
	if err != nil {
		panic(fmt.Sprintf("sim: node %d: %v", i, err)) // the cores' inputs are valid by construction
	}
	if up.Meta == nil {
		return
	}
	s.installed(i, up.Meta)
	for _, addr := range up.Meta.Servers {
		to := s.cfg.Ring.Index(ring.UIDOf(addr))
		if to == i {
			continue
		}
		s.counts.MetaPushes++
		if !s.deliverable(i, to) {
			continue
		}
		d := s.cfg.Delay(s.rng, i, to)
		s.push(event{at: s.now + d, kind: evMeta, node: int32(to), aux: s.inc[to], meta: up.Meta})
	}
	s.schedule(i)
}

// install handles metadata pushed to member i.
func (s *Sim) install(i int, m *membership.Metadata) {
	if !s.roles[i].Install(s.now, m) {
		return
	}
	s.installed(i, m)
	if coord := ring.UIDOf(m.Coordinator); coord != s.cfg.Ring.Order()[i] {
		// As on the network: the coordinator's metadata is as good as
		// its heartbeat, and tells a member that missed the election who won.
		s.emit(i, s.nodes[i].Step(s.now, ring.Message{Type: ring.MsgHeartbeat, From: coord, To: s.cfg.Ring.Order()[i], Cand: coord, Round: m.Round}))
	}
	s.schedule(i)
}

// installed makes m node i's ring and reports it.
func (s *Sim) installed(i int, m *membership.Metadata) {
	if m.Has(s.addrs[i]) {
		if err := s.nodes[i].SetRing(m.Ring()); err != nil {
			panic(fmt.Sprintf("sim: node %d: %v", i, err))
		}
	}
	if s.cfg.OnMeta != nil {
		s.cfg.OnMeta(s.now, i, m)
	}
}

// Role returns node i's coordinator role (nil without Config.Meta).
func (s *Sim) Role(i int) *coordinator.Coordinator {
	if s.roles == nil {
		return nil
	}
	return s.roles[i]
}
