package server

import (
	"context"
	"crypto/hmac"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/ringside/ringside/ring/coordinator"
	"github.com/ringside/ringside/ring/membership"
)

// Bounds of the servers a member remembers having lost from its ring: it
// looks for them after a partition, not forever.
const (
	maxLost    = 64
	forgetLost = 10 * time.Minute
)

// syncMeta is metadata anti-entropy. Every detector timeout a member asks
// one other member (in turn) for its metadata and installs it when it is
// newer: a pushed update that was lost is caught up. It also asks one of
// the servers its ring lost (in turn). A partition leaves two rings that
// removed each other, and their own members drop each other's messages,
// so nothing else would bring them back together: the side that finds
// the other ring and yields to it (coordinator.Yields) rejoins there. The
// join seeds are asked too, which joins a server that started its own
// ring of one because no seed answered while they were all starting.
func (s *Server) syncMeta(ctx context.Context) {
	every := max(s.cfg.SuspectTimeout, 200*time.Millisecond)
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		cur := s.currentMeta()
		if cur == nil {
			continue // still joining
		}
		if !cur.Has(s.cfg.Addr) {
			s.startRejoin(cur) // a rejoin that gave up tries again
			continue
		}
		peers := slices.DeleteFunc(slices.Clone(cur.Servers), func(a string) bool { return a == s.cfg.Addr })
		if len(peers) > 0 {
			if nm, err := s.fetchMeta(ctx, peers[i%len(peers)]); err == nil {
				s.do(ctx, func() {
					if s.installMeta(nm) {
						s.log.Info("caught up with newer metadata", "round", nm.Round, "version", nm.Version)
					}
				})
			}
		}
		// Servers this ring lost, and the join seeds: a server that
		// bootstrapped alone because no seed answered in time (they were
		// starting too) finds their ring this way.
		if lost := append(s.lostServers(), s.cfg.Join...); len(lost) > 0 {
			addr := lost[i%len(lost)]
			if other, err := s.fetchMeta(ctx, addr); err == nil && !other.Has(s.cfg.Addr) && coordinator.Yields(cur, other) {
				s.log.Warn("found a larger ring this one had lost; leaving for it", "via", addr,
					"coordinator", other.Coordinator, "servers", len(other.Servers), "ours", len(cur.Servers))
				s.startRejoin(other)
			}
		}
	}
}

// noteLost remembers the members old had and nm has not, and forgets the
// lost servers that are members again.
func (s *Server) noteLost(old, nm *membership.Metadata) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		s.lost = map[string]time.Time{}
	}
	now := time.Now()
	if old != nil {
		for _, a := range old.Servers {
			if a != s.cfg.Addr && !nm.Has(a) {
				s.lost[a] = now
			}
		}
	}
	for a, at := range s.lost {
		if nm.Has(a) || now.Sub(at) > forgetLost {
			delete(s.lost, a)
		}
	}
	for len(s.lost) > maxLost {
		oldest := ""
		for a, at := range s.lost {
			if oldest == "" || at.Before(s.lost[oldest]) {
				oldest = a
			}
		}
		delete(s.lost, oldest)
	}
}

// lostServers lists the lost servers, sorted.
func (s *Server) lostServers() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.lost))
}

// fetchMeta asks addr — a member, a seed or a server the ring lost, so
// not necessarily one that knows the secret — for its ring. The question
// carries no secret; the answer must carry its proof (handleRing).
func (s *Server) fetchMeta(ctx context.Context, addr string) (*membership.Metadata, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/internal/ring", nil)
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", addr, err)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metadata of %s: %s", addr, resp.Status)
	}
	if !hmac.Equal([]byte(resp.Header.Get(HeaderProof)), []byte(proof(s.cfg.Secret, b))) {
		s.m.malformed.WithLabelValues("unauthorised").Inc()
		return nil, fmt.Errorf("metadata of %s: no proof that a server with the cluster secret sent it (%s)", addr, HeaderProof)
	}
	return membership.Decode(b)
}
