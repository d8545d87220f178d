package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/ringside/ringside/ring/membership"
)

// A server that joins a ring — for the first time, after a restart from
// its log, or after a partition cut it off — becomes responsible for keys
// whose latest writes it never saw. It pulls them from the other members
// once per join (settle). Reads do not wait for that: an owner's read
// takes the newest copy among every responsible server (read.go), so a
// stale copy here is never served. Pushes from the old holders
// (rebalance.go) still happen; versions make the overlap harmless.

// maxPull bounds one pull answer: everything one member holds for the
// joiner.
const maxPull = 256 << 20

// pull asks every other member of cur for the entries this server is
// responsible for under cur, and stores them.
func (s *Server) pull(ctx context.Context, cur *membership.Metadata) error {
	body := cur.Encode()
	for _, from := range cur.Servers {
		if from == s.cfg.Addr {
			continue
		}
		resp, err := s.peerRequest(ctx, http.MethodPost, from, "/internal/pull?for="+s.cfg.Addr, body)
		if err != nil {
			return fmt.Errorf("pull from %s: %w", from, err)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxPull+1))
		resp.Body.Close()
		switch {
		case err != nil:
			return fmt.Errorf("pull from %s: %w", from, err)
		case resp.StatusCode != http.StatusOK:
			return fmt.Errorf("pull from %s: %s: %s", from, resp.Status, bytes.TrimSpace(b[:min(len(b), 200)]))
		case len(b) > maxPull:
			return fmt.Errorf("pull from %s: over %d bytes", from, maxPull)
		}
		items, err := DecodeItems(b)
		if err != nil {
			return fmt.Errorf("pull from %s: %w", from, err)
		}
		for _, it := range items {
			if _, err := s.store.Apply(it.Key, it.Entry); err != nil {
				return err
			}
		}
	}
	return nil
}

// handlePull answers POST /internal/pull?for=ADDR with the entries ADDR
// is responsible for under the metadata in the body (the asker's: it may
// be newer than this server's).
func (s *Server) handlePull(w http.ResponseWriter, r *http.Request) {
	to := r.URL.Query().Get("for")
	if err := membership.CheckAddr(to); err != nil {
		s.badRequest(w, "pull", fmt.Errorf("for: %w", err))
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	if err != nil || len(b) > 1<<20 {
		s.badRequest(w, "pull", fmt.Errorf("metadata: unreadable or over 1 MiB"))
		return
	}
	meta, err := membership.Decode(b)
	if err != nil {
		s.badRequest(w, "pull", err)
		return
	}
	var out []byte
	for _, key := range s.store.Keys() {
		if !slices.Contains(meta.Responsible(key), to) {
			continue
		}
		e, ok, err := s.store.Get(key)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if ok {
			out = AppendItem(out, Item{Key: key, Entry: e})
		}
		if len(out) > maxPull {
			http.Error(w, fmt.Sprintf("pull: over %d bytes", maxPull), http.StatusInsufficientStorage)
			return
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(out)
}

// settle pulls, once per (re)join, what this server is responsible for.
func (s *Server) settle(ctx context.Context, cur *membership.Metadata) error {
	if s.settled.Load() {
		return nil
	}
	epoch := s.joins.Load()
	if err := s.pull(ctx, cur); err != nil {
		return err
	}
	if s.joins.Load() != epoch {
		return fmt.Errorf("rejoined while settling: settle again")
	}
	s.settled.Store(true)
	s.log.Info("settled: pulled what this server is responsible for", "version", cur.Version)
	return nil
}
