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
	"github.com/ringside/ringside/ring/coordinator"
	"github.com/ringside/ringside/ring/membership"
)

// installMeta makes metadata received from a peer current when it is
// newer. Election state locked.
func (s *Server) installMeta(nm *membership.Metadata) bool {
	if !s.role.Install(s.now(), nm) {
		return false
	}
	s.publish(nm)
	return true
}

// adoptMeta makes nm, the answer to this server's rejoin, current, and
// starts the election state machine afresh from it: a round this server
// reached in a ring it left does not compare with the new ring's rounds.
func (s *Server) adoptMeta(nm *membership.Metadata) {
	s.role.Adopt(s.now(), nm)
	s.joins.Add(1)
	s.settled.Store(false)
	s.node = nil
	s.publish(nm)
}

// apply carries out what the coordinator core decided: install its new
// metadata here and push it to every other member.
func (s *Server) apply(up coordinator.Update, err error) {
	if err != nil {
		s.log.Error("coordinator", "err", err)
		return
	}
	if up.Meta == nil {
		return
	}
	if len(up.Removed) > 0 {
		s.log.Warn("removing servers", "removed", up.Removed, "round", up.Meta.Round, "version", up.Meta.Version)
	}
	s.publish(up.Meta)
	s.pushMeta(up.Meta)
}

// publish makes nm, which the coordinator core already holds, this
// server's metadata: handlers see it, the ring state machine follows it and
// the rebalancer moves data for it.
func (s *Server) publish(nm *membership.Metadata) {
	s.noteLost(s.currentMeta(), nm)
	s.mu.Lock()
	s.meta = nm
	s.events.MetaApplied = time.Now().UnixNano()
	s.mu.Unlock()
	s.m.metaVersion.Set(float64(nm.Version))
	s.leaseMu.Lock()
	s.lease.Members(nm.Servers)
	s.leaseMu.Unlock()
	select {
	case s.askNow <- struct{}{}:
	default:
	}
	s.tr.SetPeers(nm.Addrs())
	if !nm.Has(s.cfg.Addr) {
		s.startRejoin(nm)
		return
	}
	coord := ring.UIDOf(nm.Coordinator)
	if s.node == nil {
		nc := ring.Config{
			Self: s.self, Ring: nm.Ring(), Round: nm.Round, Leader: coord, Now: s.now(),
			HopBound: s.cfg.HopBound, SuspectTimeout: s.cfg.SuspectTimeout, SuspectJitter: s.cfg.SuspectJitter,
			HeartbeatInterval: s.cfg.HeartbeatInterval, AckTimeout: s.cfg.AckTimeout,
		}
		if nc.SuspectJitter > 0 {
			nc.Rand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), s.self.Lo))
		}
		node, err := s.alg.NewElector(nc)
		if err != nil {
			s.log.Error("cannot start the ring state machine", "err", err)
			return
		}
		// A fresh state machine counts from zero.
		s.node, s.seen = node, ring.Stats{}
	} else {
		if err := s.node.SetRing(nm.Ring()); err != nil {
			s.log.Error("ring metadata rejected by the state machine", "err", err)
			return
		}
		if coord != s.self {
			// Metadata from the coordinator is as good as its heartbeat,
			// and tells a server that missed the election who won.
			s.send(s.node.Step(s.now(), ring.Message{Type: ring.MsgHeartbeat, From: coord, To: s.self, Cand: coord, Round: nm.Round}))
		}
	}
	s.setCoordinatorGauge()
	select {
	case s.rebal <- struct{}{}:
	default:
	}
}

func (s *Server) setCoordinatorGauge() {
	if s.role.Active() {
		s.m.coordinator.Set(1)
	} else {
		s.m.coordinator.Set(0)
	}
}

// takeOver makes this server the coordinator after it won round.
func (s *Server) takeOver(round uint64) {
	up, err := s.role.Won(s.now(), round)
	if err == nil && up.Meta != nil {
		s.log.Info("elected coordinator", "round", round, "replaces", up.Removed, "servers", len(up.Meta.Servers))
		s.m.won.Inc()
	}
	s.apply(up, err)
}

// pushMeta sends nm to every other member, in the background.
func (s *Server) pushMeta(nm *membership.Metadata) {
	body := nm.Encode()
	for _, addr := range nm.Servers {
		if addr == s.cfg.Addr {
			continue
		}
		go func() {
			resp, err := s.peerRequest(context.Background(), http.MethodPut, addr, "/internal/metadata", body)
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
	// Election is the joiner's algorithm; empty from a server that
	// predates the field, which ran Chang–Roberts.
	Election string `json:"election,omitempty"`
}

type joinRedirect struct {
	Coordinator string `json:"coordinator"`
	// Self is the answering server's address when it knows no
	// coordinator: it is joining too.
	Self string `json:"self,omitempty"`
}

// handleJoin admits a server (coordinator) or names the coordinator.
func (s *Server) handleJoin(w http.ResponseWriter, r *http.Request) {
	req, err := decodeJoin(r.Body)
	if err != nil {
		s.badRequest(w, "join", err)
		return
	}
	if req.Election != s.alg.Name {
		// One ring, one election: members of different algorithms would
		// misread each other's messages, so the joiner is told why and
		// gives up rather than retrying.
		s.log.Warn("refused a server running another election", "addr", req.Addr, "election", req.Election, "ours", s.alg.Name)
		http.Error(w, fmt.Sprintf("%s: this ring runs the %s election, %s runs %s", errElectionMismatch, s.alg.Name, req.Addr, req.Election),
			http.StatusPreconditionFailed)
		return
	}
	var nm *membership.Metadata
	var redirect string
	var joinErr error
	err = s.do(r.Context(), func() {
		var up coordinator.Update
		nm, redirect, up, joinErr = s.role.Join(s.now(), req.Addr)
		s.apply(up, nil)
	})
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case joinErr != nil:
		s.badRequest(w, "join", joinErr)
	case nm == nil:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		red := joinRedirect{Coordinator: redirect}
		if redirect == "" {
			red.Self = s.cfg.Addr
		}
		json.NewEncoder(w).Encode(red)
	default:
		s.log.Info("admitted server", "addr", req.Addr, "version", nm.Version)
		w.Header().Set("Content-Type", "application/json")
		w.Write(nm.Encode())
	}
}

var (
	errUnreachable      = errors.New("unreachable")
	errElectionMismatch = errors.New("election algorithm mismatch")
)

// tryJoin asks one server to admit us: metadata, or the coordinator to ask.
func (s *Server) tryJoin(ctx context.Context, addr string) (*membership.Metadata, string, error) {
	m, red, err := s.askJoin(ctx, addr)
	return m, red.Coordinator, err
}

// decodeRedirect reads a 409 answer to a join. The joiner dials the
// coordinator it names next, with the secret: an address that is no
// host:port is refused here rather than pasted into a URL.
func decodeRedirect(b []byte) (joinRedirect, error) {
	var red joinRedirect
	if err := json.Unmarshal(b, &red); err != nil {
		return joinRedirect{}, err
	}
	for _, a := range []struct{ name, v string }{{"coordinator", red.Coordinator}, {"self", red.Self}} {
		if a.v == "" {
			continue
		}
		if err := membership.CheckAddr(a.v); err != nil {
			return joinRedirect{}, fmt.Errorf("%s: %w", a.name, err)
		}
	}
	return red, nil
}

// askJoin is tryJoin that also tells who answered when it is joining too.
func (s *Server) askJoin(ctx context.Context, addr string) (*membership.Metadata, joinRedirect, error) {
	body, _ := json.Marshal(joinRequest{Addr: s.cfg.Addr, Election: s.alg.Name})
	resp, err := s.peerRequest(ctx, http.MethodPost, addr, "/internal/join", body)
	if err != nil {
		return nil, joinRedirect{}, fmt.Errorf("%w: %v", errUnreachable, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, joinRedirect{}, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		m, err := membership.Decode(b)
		return m, joinRedirect{}, err
	case http.StatusConflict:
		red, err := decodeRedirect(b)
		if err != nil {
			return nil, joinRedirect{}, fmt.Errorf("join redirect from %s: %w", addr, err)
		}
		return nil, red, nil
	case http.StatusPreconditionFailed:
		return nil, joinRedirect{}, fmt.Errorf("join via %s: %w: %s", addr, errElectionMismatch, bytes.TrimSpace(b))
	}
	return nil, joinRedirect{}, fmt.Errorf("join via %s: %s: %s", addr, resp.Status, bytes.TrimSpace(b))
}

// join admits this server to the ring through the seeds, or bootstraps a
// ring of one when no seed answers at all.
func (s *Server) join(ctx context.Context) error {
	seeds := slices.DeleteFunc(slices.Clone(s.cfg.Join), func(a string) bool { return a == s.cfg.Addr })
	deadline := time.Now().Add(s.cfg.JoinTimeout)
	for {
		// Seeds that answered but are joining too (all started at once,
		// as docker compose v2 starts them): the one of largest UID — the
		// coordinator Chang–Roberts would elect — starts the ring, the
		// others join it.
		reachable, onlyJoining, largest := false, true, true
		for _, seed := range seeds {
			m, red, err := s.askJoin(ctx, seed)
			if err == nil && red.Self == s.cfg.Addr {
				continue // a seed name that resolved to this server
			}
			if err == nil && red.Coordinator != "" && red.Coordinator != seed {
				m, _, err = s.tryJoin(ctx, red.Coordinator)
			}
			if err == nil || !errors.Is(err, errUnreachable) {
				reachable = true
				if err != nil || red.Self == "" {
					onlyJoining = false
				} else if ring.UIDOf(s.cfg.Addr).Less(ring.UIDOf(red.Self)) {
					largest = false
				}
			}
			if m != nil {
				return s.do(ctx, func() { s.installMeta(m) })
			}
			if errors.Is(err, errElectionMismatch) {
				return err // retrying cannot help
			}
			if err != nil {
				s.log.Debug("join attempt failed", "seed", seed, "err", err)
			}
		}
		if !reachable || onlyJoining && largest {
			if len(seeds) > 0 {
				s.log.Info("no seed in a ring; starting a new one", "seeds", seeds, "seeds_reachable", reachable)
			}
			var berr error
			err := s.do(ctx, func() {
				var up coordinator.Update
				up, berr = s.role.Bootstrap(s.now(), s.cfg.Replicas)
				s.apply(up, berr)
			})
			return errors.Join(err, berr)
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

// startRejoin starts rejoin unless it is running already.
func (s *Server) startRejoin(m *membership.Metadata) {
	if s.rejoining.Swap(true) {
		return
	}
	s.log.Warn("this server is not in the ring metadata; rejoining", "version", m.Version)
	go func() {
		defer s.rejoining.Store(false)
		s.rejoin(m)
	}()
}

// rejoin asks the ring this server was removed from to admit it again.
func (s *Server) rejoin(m *membership.Metadata) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.JoinTimeout)
	defer cancel()
	var errs []error
	for ctx.Err() == nil && !s.stopped.Load() {
		for _, addr := range append([]string{m.Coordinator}, m.Servers...) {
			nm, red, err := s.tryJoin(ctx, addr)
			if err == nil && red != "" {
				nm, _, err = s.tryJoin(ctx, red)
			}
			if nm != nil {
				s.do(ctx, func() { s.adoptMeta(nm) })
				return
			}
			if err != nil {
				s.log.Debug("rejoin attempt failed", "via", addr, "err", err)
				errs = append(errs[max(0, len(errs)-3):], fmt.Errorf("via %s: %w", addr, err))
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !s.stopped.Load() {
		s.log.Warn("rejoin gave up; anti-entropy will try again", "after", s.cfg.JoinTimeout, "last errors", errors.Join(errs...))
	}
}
