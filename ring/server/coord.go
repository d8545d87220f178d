package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/membership"
)

// installMeta makes nm current when it is newer. Loop goroutine only.
func (s *Server) installMeta(nm *membership.Metadata) bool {
	s.mu.Lock()
	if !nm.Newer(s.meta) {
		s.mu.Unlock()
		return false
	}
	s.meta = nm
	s.events.MetaApplied = time.Now().UnixNano()
	s.mu.Unlock()
	s.m.metaVersion.Set(float64(nm.Version))
	s.tr.SetPeers(nm.Addrs())
	if !nm.Has(s.cfg.Addr) {
		s.log.Warn("this server is not in the ring metadata; rejoining", "version", nm.Version)
		go s.rejoin(nm)
		return true
	}
	coord := ring.UIDOf(nm.Coordinator)
	if s.node == nil {
		nc := ring.Config{
			Self: s.self, Ring: nm.Ring(), Round: nm.Round, Leader: coord, Now: s.now(),
			HopBound: s.cfg.HopBound, SuspectTimeout: s.cfg.SuspectTimeout, SuspectJitter: s.cfg.SuspectJitter,
			HeartbeatInterval: s.cfg.HeartbeatInterval,
		}
		if nc.SuspectJitter > 0 {
			nc.Rand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), s.self.Lo))
		}
		node, err := ring.NewNode(nc)
		if err != nil {
			s.log.Error("cannot start the ring state machine", "err", err)
			return false
		}
		s.node = node
	} else {
		if err := s.node.SetRing(nm.Ring()); err != nil {
			s.log.Error("ring metadata rejected by the state machine", "err", err)
			return false
		}
		if coord != s.self {
			// Metadata from the coordinator is as good as its heartbeat,
			// and tells a server that missed the election who won.
			s.send(s.node.Step(s.now(), ring.Message{Type: ring.MsgHeartbeat, From: coord, To: s.self, Cand: coord, Round: nm.Round}))
		}
	}
	if nm.Coordinator == s.cfg.Addr {
		if !s.coord {
			s.coord, s.coordRound = true, nm.Round
		}
		s.trackServers(nm)
	} else if s.coord {
		s.coord, s.detectors = false, nil
	}
	if s.coord {
		s.m.coordinator.Set(1)
	} else {
		s.m.coordinator.Set(0)
	}
	select {
	case s.rebal <- struct{}{}:
	default:
	}
	return true
}

// trackServers keeps one failure detector per member while coordinating.
func (s *Server) trackServers(nm *membership.Metadata) {
	if s.detectors == nil {
		s.detectors = map[string]*ring.Detector{}
	}
	for addr := range s.detectors {
		if !nm.Has(addr) {
			delete(s.detectors, addr)
		}
	}
	for _, addr := range nm.Servers {
		if addr != s.cfg.Addr && s.detectors[addr] == nil {
			s.detectors[addr] = ring.NewDetector(s.now(), s.cfg.SuspectTimeout, 0, nil)
		}
	}
}

// takeOver makes this server the coordinator after it won round.
func (s *Server) takeOver(round uint64) {
	s.mu.RLock()
	cur := s.meta
	s.mu.RUnlock()
	nm, err := cur.TakeOver(s.cfg.Addr, round)
	if err != nil {
		s.log.Error("cannot take over the coordinator role", "err", err)
		return
	}
	s.log.Info("elected coordinator", "round", round, "replaces", cur.Coordinator, "servers", len(nm.Servers))
	s.coord, s.coordRound = true, round
	s.m.won.Inc()
	s.installMeta(nm)
	s.pushMeta(nm)
}

// checkServers removes members whose heartbeat acks stopped. Loop only.
func (s *Server) checkServers() {
	if !s.coord {
		return
	}
	now := s.now()
	var dead []string
	for addr, d := range s.detectors {
		if d.Suspect(now) {
			dead = append(dead, addr)
		}
	}
	if len(dead) == 0 {
		return
	}
	slices.Sort(dead)
	s.mu.RLock()
	cur := s.meta
	s.mu.RUnlock()
	nm, err := cur.Without(dead...)
	if err != nil {
		s.log.Error("cannot remove dead servers", "dead", dead, "err", err)
		return
	}
	s.log.Warn("removing servers that stopped answering heartbeats", "dead", dead, "version", nm.Version)
	s.installMeta(nm)
	s.pushMeta(nm)
}

// pushMeta sends nm to every other member, in the background.
func (s *Server) pushMeta(nm *membership.Metadata) {
	body := nm.Encode()
	for _, addr := range nm.Servers {
		if addr == s.cfg.Addr {
			continue
		}
		go func() {
			req, _ := http.NewRequest(http.MethodPut, "http://"+addr+"/internal/metadata", bytes.NewReader(body))
			resp, err := s.hc.Do(req)
			if err != nil {
				s.log.Debug("metadata push failed", "to", addr, "err", err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
}

type joinRequest struct {
	Addr string `json:"addr"`
}

type joinRedirect struct {
	Coordinator string `json:"coordinator"`
}

// handleJoin admits a server (coordinator) or names the coordinator.
func (s *Server) handleJoin(w http.ResponseWriter, r *http.Request) {
	var req joinRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil {
		s.badRequest(w, "join", fmt.Errorf("body: %w", err))
		return
	}
	if err := membership.CheckAddr(req.Addr); err != nil {
		s.badRequest(w, "join", fmt.Errorf("addr: %w", err))
		return
	}
	var nm *membership.Metadata
	var coordinator string
	var joinErr error
	err := s.do(r.Context(), func() {
		s.mu.RLock()
		cur := s.meta
		s.mu.RUnlock()
		if cur == nil || !s.coord {
			if cur != nil {
				coordinator = cur.Coordinator
			}
			return
		}
		nm, joinErr = cur.With(req.Addr)
		if joinErr != nil {
			return
		}
		if nm != cur {
			s.installMeta(nm)
			s.pushMeta(nm)
		}
		if d := s.detectors[req.Addr]; d != nil {
			d.Heard(s.now()) // a restarted server gets a fresh chance
		}
	})
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case joinErr != nil:
		s.badRequest(w, "join", joinErr)
	case nm == nil:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		json.NewEncoder(w).Encode(joinRedirect{Coordinator: coordinator})
	default:
		s.log.Info("admitted server", "addr", req.Addr, "version", nm.Version)
		w.Header().Set("Content-Type", "application/json")
		w.Write(nm.Encode())
	}
}

var errUnreachable = errors.New("unreachable")

// tryJoin asks one server to admit us: metadata, or the coordinator to ask.
func (s *Server) tryJoin(ctx context.Context, addr string) (*membership.Metadata, string, error) {
	body, _ := json.Marshal(joinRequest{Addr: s.cfg.Addr})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/internal/join", bytes.NewReader(body))
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", errUnreachable, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, "", err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		m, err := membership.Decode(b)
		return m, "", err
	case http.StatusConflict:
		var red joinRedirect
		if err := json.Unmarshal(b, &red); err != nil {
			return nil, "", fmt.Errorf("join redirect from %s: %w", addr, err)
		}
		return nil, red.Coordinator, nil
	}
	return nil, "", fmt.Errorf("join via %s: %s: %s", addr, resp.Status, bytes.TrimSpace(b))
}

// join admits this server to the ring through the seeds, or bootstraps a
// ring of one when no seed answers at all.
func (s *Server) join(ctx context.Context) error {
	seeds := slices.DeleteFunc(slices.Clone(s.cfg.Join), func(a string) bool { return a == s.cfg.Addr })
	deadline := time.Now().Add(s.cfg.JoinTimeout)
	for {
		reachable := false
		for _, seed := range seeds {
			m, red, err := s.tryJoin(ctx, seed)
			if err == nil && red != "" && red != seed {
				m, _, err = s.tryJoin(ctx, red)
			}
			if err == nil || !errors.Is(err, errUnreachable) {
				reachable = true
			}
			if m != nil {
				return s.do(ctx, func() { s.installMeta(m) })
			}
			if err != nil {
				s.log.Debug("join attempt failed", "seed", seed, "err", err)
			}
		}
		if !reachable {
			if len(seeds) > 0 {
				s.log.Info("no seed reachable; starting a new ring", "seeds", seeds)
			}
			m, err := membership.New(1, 1, s.cfg.Addr, s.cfg.Replicas, []string{s.cfg.Addr})
			if err != nil {
				return err
			}
			return s.do(ctx, func() { s.installMeta(m) })
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("join: no coordinator admitted %s within %s (seeds %v)", s.cfg.Addr, s.cfg.JoinTimeout, seeds)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// rejoin asks the ring this server was removed from to admit it again.
func (s *Server) rejoin(m *membership.Metadata) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.JoinTimeout)
	defer cancel()
	for ctx.Err() == nil && !s.stopped.Load() {
		for _, addr := range append([]string{m.Coordinator}, m.Servers...) {
			nm, red, err := s.tryJoin(ctx, addr)
			if err == nil && red != "" {
				nm, _, err = s.tryJoin(ctx, red)
			}
			if nm != nil {
				s.do(ctx, func() { s.installMeta(nm) })
				return
			}
			_ = err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
