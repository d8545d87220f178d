package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/ringside/ringside/ring/kv"
	"github.com/ringside/ringside/ring/membership"
)

// handleWrite serves PUT and DELETE /kv/{key}: the owner versions,
// stores and replicates synchronously before it acknowledges; any other
// server forwards to the owner.
func (s *Server) handleWrite(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw, code: http.StatusOK}
	op := map[string]string{http.MethodPut: "put", http.MethodDelete: "delete"}[r.Method]
	defer s.count(op, w)
	key := r.PathValue("key")
	if err := checkKey(key); err != nil {
		s.badRequest(w, "kv", err)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, kv.MaxValueLen+1))
	if err != nil {
		s.badRequest(w, "kv", fmt.Errorf("body: %w", err))
		return
	}
	if len(body) > kv.MaxValueLen {
		s.m.malformed.WithLabelValues("kv").Inc()
		http.Error(w, fmt.Sprintf("value: over %d bytes", kv.MaxValueLen), http.StatusRequestEntityTooLarge)
		return
	}
	meta := s.currentMeta()
	if meta == nil {
		http.Error(w, "not in a ring yet", http.StatusServiceUnavailable)
		return
	}
	if tooSmall(w, meta, meta.Responsible(key)) {
		return
	}
	if owner := meta.Owner(key); owner != s.cfg.Addr {
		s.forward(w, r, owner, body)
		return
	}
	if !s.leased(w) {
		return
	}
	e := kv.Entry{Value: body, Deleted: r.Method == http.MethodDelete}
	cur := s.store.Version(key)
	if cur == math.MaxUint64 {
		http.Error(w, fmt.Sprintf("key %q: its version space is exhausted", key), http.StatusInternalServerError)
		return
	}
	e.Version = s.clock.next(cur)
	mine := e.Version
	applied, err := s.store.Apply(key, e)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if !applied {
		// A concurrent write took a newer version and was stored first.
		// This one is ordered just before it and overwritten at once,
		// which a linearizable register allows — but only once what
		// overwrote it is replicated: acknowledging this one while the
		// newer one lives on this server alone would lose both with it.
		newer, ok, err := s.store.Get(key)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if ok {
			e = newer
		}
	}
	if missing := s.replicate(r.Context(), meta, key, e); len(missing) > 0 {
		// Not acknowledged: the write may or may not survive, and the
		// client is told so rather than told it is safe.
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("not acknowledged: replicas %s did not store the write (it may or may not have taken effect)",
			strings.Join(missing, ", ")), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set(HeaderVersion, strconv.FormatUint(mine, 10))
	w.WriteHeader(http.StatusNoContent)
}

// replicate sends e to every replica, waits for all of them, and returns
// the ones that did not store it, sorted, each with its reason.
func (s *Server) replicate(ctx context.Context, meta *membership.Metadata, key string, e kv.Entry) []string {
	replicas := meta.Responsible(key)[1:]
	epoch := meta.Epoch().String()
	type result struct {
		to  string
		err error
	}
	results := make(chan result, len(replicas))
	method := http.MethodPut
	if e.Deleted {
		method = http.MethodDelete
	}
	for _, to := range replicas {
		go func() {
			results <- result{to, s.replicateTo(ctx, method, to, key, e, epoch)}
		}()
	}
	var missing []string
	for range replicas {
		if r := <-results; r.err != nil {
			s.m.replFail.Inc()
			s.log.Debug("replica did not acknowledge", "key", key, "replica", r.to, "err", r.err)
			missing = append(missing, fmt.Sprintf("%s (%v)", r.to, r.err))
		}
	}
	slices.Sort(missing)
	return missing
}

func (s *Server) replicateTo(ctx context.Context, method, to, key string, e kv.Entry, epoch string) error {
	resp, err := s.peerRequest(ctx, method, to, KeyPath("/internal/replicate/", key), e.Value,
		HeaderVersion, strconv.FormatUint(e.Version, 10), HeaderOwner, s.cfg.Addr, HeaderEpoch, epoch)
	if err != nil {
		return err
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// staleOwner fences replication: a replica whose metadata is newer than
// the sender's, and names another owner of the key, refuses the write, so
// a server that has not yet learnt it lost a key cannot have a write
// acknowledged beside the new owner's.
func (s *Server) staleOwner(r *http.Request, key string) error {
	owner := r.Header.Get(HeaderOwner)
	if owner == "" {
		return fmt.Errorf("%s: want the sender's address", HeaderOwner)
	}
	round, version, err := parseEpoch(r.Header.Get(HeaderEpoch))
	if err != nil {
		return err
	}
	cur := s.currentMeta()
	if cur == nil || !(cur.Round > round || cur.Round == round && cur.Version > version) {
		return nil
	}
	if now := cur.Owner(key); now != owner {
		return fmt.Errorf("%w: under metadata %d.%d the owner of %q is %s, not %s", errStaleOwner, cur.Round, cur.Version, key, now, owner)
	}
	return nil
}
