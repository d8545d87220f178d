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
// (wire.MsgLeaseAsk), whether it counts this server. Answers come back
// to onLease; one that never comes confirms nothing.
func (s *Server) askLease() {
	meta := s.currentMeta()
	if meta == nil {
		return
	}
	s.leaseMu.Lock()
	n := s.lease.Ask(s.now())
	s.leaseMu.Unlock()
	for _, to := range meta.Servers {
		if to != s.cfg.Addr {
			s.tr.Send(ring.Message{Type: wire.MsgLeaseAsk, From: s.self, To: ring.UIDOf(to), Round: n})
		}
	}
}

// onLease handles the serving lease's frames, reporting whether m was
// one. They bypass the election lock: answering takes published state
// only.
func (s *Server) onLease(m ring.Message) bool {
	switch m.Type {
	case wire.MsgLeaseAsk:
		s.tr.Send(s.answerLease(m))
	case wire.MsgLeaseAnswer:
		s.leaseAnswered(m)
	default:
		return false
	}
	return true
}

// answerLease answers an ask: counted when its sender is a member under
// this server's metadata, and either way with this server's rebalance
// report. The transport reaches only members, so a stranger's ask goes
// unanswered, which confirms nothing as well.
func (s *Server) answerLease(ask ring.Message) ring.Message {
	a := wire.LeaseAnswer{Round: ask.Round}
	if meta := s.currentMeta(); meta != nil {
		_, a.Counted = meta.AddrOf(ask.From)
	}
	if e, ok := s.rebalancedAt(); ok {
		a.Rebalanced, a.HasRebalanced = [2]uint64{e.Round, e.Version}, true
	}
	return a.Message(s.self, ask.From)
}

// leaseAnswered records a member's answer and its rebalance report.
func (s *Server) leaseAnswered(m ring.Message) {
	a, err := wire.ParseLeaseAnswer(m)
	if err != nil {
		s.m.malformed.WithLabelValues("peer").Inc()
		s.log.Debug("lease answer", "err", err)
		return
	}
	meta := s.currentMeta()
	if meta == nil {
		return
	}
	from, ok := meta.AddrOf(m.From)
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
