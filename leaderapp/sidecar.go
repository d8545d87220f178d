package leaderapp

// A replica's role as its elector sidecar reports it (GET / on the
// sidecar), with fencing's rule for a leader whose term is not yet safe.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Role returns the replica's role now and the leader it follows.
func (s *Server) Role() (Kind, string) {
	k, leader, _ := s.roleTerm()
	return k, leader
}

// roleTerm is Role with the leader's term (-1: not reported). With
// fencing, a leader whose term is unknown, older than one this replica
// has seen, or not yet announced to its peers does not act as leader.
func (s *Server) roleTerm() (Kind, string, int64) {
	k, leader, term := s.sidecarRole()
	if s.cfg.Fencing && k == Leader && (term < 0 || uint64(term) < s.fence.Newest() || s.announced.Load() != term+1) {
		return Leaderless, "", term
	}
	return k, leader, term
}

// sidecarRole is the role as the sidecar's last answer gives it.
func (s *Server) sidecarRole() (Kind, string, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, leader := s.role.At(s.now())
	if term, known := s.role.Term(); known {
		return k, leader, int64(term)
	}
	return k, leader, -1
}

// Run asks the sidecar who leads every Poll until ctx ends, and logs
// every change of role.
func (s *Server) Run(ctx context.Context) {
	var was Kind
	for {
		if ans, err := AskSidecar(ctx, s.cfg.Client, s.cfg.Sidecar); err == nil {
			s.mu.Lock()
			s.role.Observe(s.now(), ans)
			if ans.Name != "" && ans.Name != s.cfg.Name {
				s.followed = ans.Name
			}
			s.mu.Unlock()
			if s.cfg.Fencing && ans.Term != nil {
				s.fence.Admit(*ans.Term) // an older term than seen changes nothing
			}
		}
		if k, _, term := s.sidecarRole(); s.cfg.Fencing && k == Leader && term >= 0 && s.announced.Load() != term+1 && uint64(term) >= s.fence.Newest() {
			s.announce(ctx, term)
		}
		if k, leader, term := s.roleTerm(); k != was {
			s.cfg.Log.Info("role", "role", k, "leader", leader, "term", term)
			was = k
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.cfg.Poll):
		}
	}
}

// Answer is what an elector sidecar says: the leader ("" for none) and,
// if it knows it, the leader's term.
type Answer struct {
	Name string  `json:"name"`
	Term *uint64 `json:"term"`
}

// AskSidecar returns an elector sidecar's answer.
func AskSidecar(ctx context.Context, hc *http.Client, sidecar string) (Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, sidecar+"/", nil)
	if err != nil {
		return Answer{}, fmt.Errorf("sidecar %q: %w", sidecar, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Answer{}, fmt.Errorf("sidecar %s: %s", sidecar, resp.Status)
	}
	var ans Answer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&ans); err != nil {
		return Answer{}, fmt.Errorf("sidecar %s: %w", sidecar, err)
	}
	return ans, nil
}
