package leaderapp

// The leader's writes and their replication: each write applied at the
// leader and at every follower (PUT /internal/apply), and fencing's
// announcement of a new term.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
)

// write applies a write as the leader of term, at every replica; it
// succeeds only when all of them applied it. A follower's fenced refusal
// raises this replica's fence: it stops acting as leader.
//
// Without fencing the leader applies first, then replicates, as a
// primary that trusts its election does: a deposed leader that has not
// noticed acts (applies) until a follower refuses it. With fencing the
// leader's own store takes the write last, once every follower has: a
// leader deposed without knowing it — frozen past its lease with writes
// in flight — learns it from its successor's refusal before it applies
// anything. Applying first, a leader woken from a pause applied two
// in-flight writes 0.1 ms apart before the first refusal came back, and
// so acted beside its successor (the kube-split-brain test on CI).
func (s *Server) write(ctx context.Context, key string, val []byte, term int64) (uint64, error) {
	Work(s.cfg.WriteWork)
	ver := Version{Seq: s.store.Next()}
	if !s.cfg.Fencing {
		if err := s.apply(key, val, ver, term, Leader, s.cfg.Name); err != nil {
			return 0, err
		}
		if err := s.replicate(ctx, key, val, ver.Seq, term); err != nil {
			return 0, err
		}
		return ver.Seq, nil
	}
	ver.Term = uint64(term) // known: roleTerm makes a leader of unknown term leaderless
	if err := s.replicate(ctx, key, val, ver.Seq, term); err != nil {
		return 0, err
	}
	// Every follower took the term, but this replica may have been frozen
	// since (its sidecar's answer gone stale) or heard of a newer term.
	if k, _, now := s.roleTerm(); k != Leader || now != term {
		return 0, fmt.Errorf("write not acknowledged: %s stopped leading term %d while its followers took the write (role %s, term %d)", s.cfg.Name, term, k, now)
	}
	if err := s.apply(key, val, ver, term, Leader, s.cfg.Name); err != nil {
		return 0, err
	}
	return ver.Seq, nil
}

// replicate sends a write the leader numbered seq to every follower and
// waits for all of them.
func (s *Server) replicate(ctx context.Context, key string, val []byte, seq uint64, term int64) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(s.cfg.Peers))
	for name, base := range s.cfg.Peers {
		if name == s.cfg.Name {
			continue
		}
		wg.Go(func() {
			resp, err := s.peer(ctx, base+"/internal/apply/"+url.PathEscape(key), val, HeaderLeader, s.cfg.Name,
				HeaderSeq, strconv.FormatUint(seq, 10), HeaderTerm, strconv.FormatInt(term, 10))
			if err != nil {
				errs <- fmt.Errorf("follower %s: %w", name, err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				if newest, err := strconv.ParseUint(resp.Header.Get(HeaderFence), 10, 64); err == nil && s.cfg.Fencing {
					s.fence.Admit(newest)
				}
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
				errs <- fmt.Errorf("follower %s: %s: %s", name, resp.Status, bytes.TrimSpace(b))
			}
		})
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	if len(all) > 0 {
		return fmt.Errorf("write not acknowledged: %w", errors.Join(all...))
	}
	return nil
}

func (s *Server) peer(ctx context.Context, u string, body []byte, header ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	req.Header.Set(HeaderSecret, s.cfg.Secret)
	return s.cfg.Client.Do(req)
}

// handleApply takes a write from a leader. Without fencing it must come
// from the leader this replica follows; from anyone else (a deposed
// leader that has not noticed yet) it is refused, which fails that write.
// With fencing the write's term decides (fence.go): a newer or equal term
// is taken from whoever sends it, an older one refused.
func (s *Server) handleApply(w http.ResponseWriter, r *http.Request) {
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(HeaderSecret)), []byte(s.cfg.Secret)) != 1 {
		http.Error(w, "replica requests need the shared secret", http.StatusForbidden)
		return
	}
	key := r.PathValue("key")
	if err := checkKey(key); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	seq, err := strconv.ParseUint(r.Header.Get(HeaderSeq), 10, 64)
	if err != nil || seq == 0 {
		http.Error(w, fmt.Sprintf("%s %q: want a positive integer", HeaderSeq, r.Header.Get(HeaderSeq)), http.StatusBadRequest)
		return
	}
	// The term is what fencing decides by; without it, it is only
	// recorded, and a sender that has none (-1, or an older replica that
	// sends no header) is taken.
	term, err := int64(-1), error(nil)
	if h := r.Header.Get(HeaderTerm); h != "" || s.cfg.Fencing {
		term, err = strconv.ParseInt(h, 10, 64)
	}
	if err != nil || term < -1 || s.cfg.Fencing && term < 0 {
		http.Error(w, fmt.Sprintf("%s %q: want the sender's term, a non-negative integer", HeaderTerm, r.Header.Get(HeaderTerm)), http.StatusBadRequest)
		return
	}
	val, ok := readValue(w, r)
	if !ok {
		return
	}
	from := r.Header.Get(HeaderLeader)
	ver := Version{Seq: seq}
	if s.cfg.Fencing {
		ver.Term = uint64(term)
	} else if k, leader := s.Role(); k != Follower || leader != from {
		http.Error(w, fmt.Sprintf("%s does not follow %q (role %s, leader %q)", s.cfg.Name, from, k, leader), http.StatusConflict)
		return
	}
	err = s.apply(key, val, ver, term, Follower, from)
	if fe := (*FencedError)(nil); errors.As(err, &fe) {
		w.Header().Set(HeaderFence, strconv.FormatUint(fe.Newest, 10))
		http.Error(w, fmt.Sprintf("%s refuses the write of %s: %v", s.cfg.Name, from, err), http.StatusConflict)
		return
	}
	if err != nil {
		// The leader's write fails with it: acknowledged means every
		// replica holds it.
		http.Error(w, err.Error(), http.StatusInsufficientStorage)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// announce tells every peer the term of this new leader before it acts
// as one: a follower that learns it here refuses the predecessor's
// writes from then on, without waiting to hear it from its own sidecar,
// so none takes a stale write after this leader's first. A peer that
// knows a newer term raises this replica's fence instead. The leader
// this one followed — frozen or cut off, most likely, since it lost the
// lease — is waited for a stale period only; it learns the term from the
// first write. Every other peer is waited for as long as a write would
// wait for it (the client's timeout): a write is acknowledged only once
// every replica applied it, so waiting costs no acknowledged write, and
// a follower slow to answer on a loaded machine (CI: over the 250-ms
// stale period) took a stale write after this leader's first.
func (s *Server) announce(ctx context.Context, term int64) {
	s.mu.Lock()
	deposed := s.followed
	s.mu.Unlock()
	var wg sync.WaitGroup
	for name, base := range s.cfg.Peers {
		if name == s.cfg.Name {
			continue
		}
		wait := cmp.Or(s.cfg.Client.Timeout, peerTimeout)
		if name == deposed {
			wait = s.cfg.Stale
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			resp, err := s.peer(ctx, base+"/internal/fence", nil, HeaderLeader, s.cfg.Name, HeaderTerm, strconv.FormatInt(term, 10))
			if err != nil {
				s.cfg.Log.Debug("announcing the term", "peer", name, "err", err)
				return
			}
			defer resp.Body.Close()
			if newest, err := strconv.ParseUint(resp.Header.Get(HeaderFence), 10, 64); err == nil {
				s.fence.Admit(newest)
			}
		})
	}
	wg.Wait()
	s.announced.Store(term + 1)
}

// handleFence takes a new leader's term (announce).
func (s *Server) handleFence(w http.ResponseWriter, r *http.Request) {
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(HeaderSecret)), []byte(s.cfg.Secret)) != 1 {
		http.Error(w, "replica requests need the shared secret", http.StatusForbidden)
		return
	}
	term, err := strconv.ParseUint(r.Header.Get(HeaderTerm), 10, 63)
	if err != nil {
		http.Error(w, fmt.Sprintf("%s %q: want a non-negative integer", HeaderTerm, r.Header.Get(HeaderTerm)), http.StatusBadRequest)
		return
	}
	if !s.cfg.Fencing {
		http.Error(w, "this replica does not fence", http.StatusNotImplemented)
		return
	}
	s.applyMu.Lock()
	err = s.fence.Admit(term)
	s.applyMu.Unlock()
	if err != nil {
		w.Header().Set(HeaderFence, strconv.FormatUint(s.fence.Newest(), 10))
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// apply stores a write in this replica's store, as leader or follower of
// leader: with fencing, only if its term is not older than the fence,
// which it raises. A *FencedError or *FullError changes nothing.
func (s *Server) apply(key string, val []byte, ver Version, term int64, as Kind, leader string) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.cfg.Fencing {
		if err := s.fence.Admit(ver.Term); err != nil {
			return err
		}
	}
	applied, err := s.store.Apply(key, val, ver)
	if applied {
		s.cfg.OnApply(Applied{At: s.now(), Key: key, Version: ver, Term: term, As: as, Leader: leader})
	}
	return err
}
