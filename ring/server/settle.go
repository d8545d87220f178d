package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/ringside/ringside/ring/kv"
	"github.com/ringside/ringside/ring/membership"
)

// A server that joins a ring — for the first time, after a restart from
// its log, or after a partition cut it off — becomes responsible for keys
// whose latest writes it never saw. Until it has pulled them from the
// other members it is unsettled: as a key's owner it answers reads with
// the newest version among every responsible server, not from its own
// store alone, so a stale copy is never served (kv-chaos on compose found
// exactly that after partitions healed). Pushes from the old holders
// (rebalance.go) still happen; versions make the overlap harmless.
//
// Settled is not enough at once: until every member has the metadata
// that names this server owner, the old owner still takes writes and
// replicates them to its own successors, not here. So reads keep taking
// the newest copy for a grace period after settling, long enough for the
// metadata to reach everyone (pushed at once, anti-entropy as a backstop).
// Replication fencing stops the old owner as soon as its replicas know.

// trusted reports whether this server may answer its keys from its own
// store: settled, and past the grace period.
func (s *Server) trusted() bool {
	if !s.settled.Load() {
		return false
	}
	grace := max(3*s.cfg.SuspectTimeout, 2*time.Second)
	return time.Since(time.Unix(0, s.settledAt.Load())) > grace
}

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

// readNewest answers a read at an unsettled owner: the newest version of
// key among this server and the other responsible servers. At least one
// other must answer — they held the key before this server joined.
func (s *Server) readNewest(w http.ResponseWriter, r *http.Request, key string, others []string) {
	best, found, err := s.store.Get(key)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	answered := len(others) == 0
	for _, to := range others {
		resp, err := s.proxy(r.Context(), http.MethodGet, to, KeyPath("/internal/kv/", key), nil, hops(r)+1)
		if err != nil {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, kv.MaxValueLen+1))
		resp.Body.Close()
		v, verr := strconv.ParseUint(resp.Header.Get(HeaderVersion), 10, 64)
		switch {
		case err != nil || len(b) > kv.MaxValueLen:
			continue
		case resp.StatusCode == http.StatusOK && verr == nil:
			answered = true
			if !found || v > best.Version {
				best, found = kv.Entry{Value: b, Version: v}, true
			}
		case resp.StatusCode == http.StatusNotFound:
			answered = true
			if verr == nil && (!found || v > best.Version) {
				best, found = kv.Entry{Version: v, Deleted: true}, true // a tombstone
			}
		}
	}
	if !answered {
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("key %q: this server joined the ring and is still settling, and no other server responsible for it answered", key), http.StatusServiceUnavailable)
		return
	}
	writeEntry(w, best, found)
}
