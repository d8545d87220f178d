package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ringside/ringside/ring/membership"
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

// HeaderRebalanced is the epoch under which the answering server last
// finished its data moves ("round.version"; absent before the first).
const HeaderRebalanced = "X-Ringside-Rebalanced"

// leaseLoop asks for confirmations every heartbeat interval, and at once
// when the membership changed, until ctx ends.
func (s *Server) leaseLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		s.askLease(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.askNow:
		}
	}
}

func (s *Server) askLease(ctx context.Context) {
	meta := s.currentMeta()
	if meta == nil {
		return
	}
	s.leaseMu.Lock()
	n := s.lease.Ask(s.now())
	s.leaseMu.Unlock()
	for _, to := range meta.Servers {
		if to != s.cfg.Addr {
			go s.askMember(ctx, to, n)
		}
	}
}

// askMember asks one member, within one lease term, whether it counts this
// server, and records its answer and its rebalance report.
func (s *Server) askMember(ctx context.Context, to string, n uint64) {
	ctx, cancel := context.WithTimeout(ctx, s.lease.Term())
	defer cancel()
	resp, err := s.peerRequest(ctx, http.MethodGet, to, "/internal/lease?from="+s.cfg.Addr, nil)
	if err != nil {
		return
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		s.leaseMu.Lock()
		s.lease.Confirmed(n, to)
		s.leaseMu.Unlock()
	}
	if v := resp.Header.Get(HeaderRebalanced); v != "" {
		round, version, err := parseEpoch(v)
		if err != nil {
			s.m.malformed.WithLabelValues("peer").Inc()
			s.log.Debug("lease answer", "from", to, "err", fmt.Errorf("%s: %w", HeaderRebalanced, err))
			return
		}
		s.lmu.Lock()
		s.role.Rebalanced(to, membership.Epoch{Round: round, Version: version})
		s.lmu.Unlock()
	}
}

// handleLease answers GET /internal/lease?from=ADDR: 204 when ADDR is a
// member under this server's metadata, 409 naming the epoch when it is
// not; either way with this server's rebalance report.
func (s *Server) handleLease(w http.ResponseWriter, r *http.Request) {
	from := r.URL.Query().Get("from")
	if err := membership.CheckAddr(from); err != nil {
		s.badRequest(w, "lease", fmt.Errorf("from: %w", err))
		return
	}
	if e, ok := s.rebalancedAt(); ok {
		w.Header().Set(HeaderRebalanced, e.String())
	}
	meta := s.currentMeta()
	switch {
	case meta == nil:
		http.Error(w, "not in a ring yet", http.StatusConflict)
	case !meta.Has(from):
		http.Error(w, fmt.Sprintf("%s is not a member under metadata %s", from, meta.Epoch()), http.StatusConflict)
	default:
		w.WriteHeader(http.StatusNoContent)
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
