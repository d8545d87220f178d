package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/ringside/ringside/ring/kv"
	"github.com/ringside/ringside/ring/membership"
)

// confirmedRead answers a read at the key's owner with the newest copy
// among the owner and every replica, and only once every replica has
// answered under fencing (handleLocalRead).
//
// Why every replica: an owner cut off from the ring keeps its metadata
// until it notices, and would serve what it holds while the rest of the
// ring has replaced it and taken newer writes — the stale reads kv-chaos
// found around partitions. The server that replaces an owner is one of
// its replicas (its successor), and it takes writes only under metadata
// that names it owner, so once it has, it refuses to confirm the old
// owner. A read confirmed by all replicas after it read the local copy
// therefore saw every write acknowledged before it began. Taking the
// newest copy also covers an owner that has just (re)joined and not yet
// pulled its keys. The price is one round trip to the replicas per read,
// the same as a write's, and a read is available exactly when a write is.
func (s *Server) confirmedRead(w http.ResponseWriter, r *http.Request, meta *membership.Metadata, key string, replicas []string) {
	best, found, err := s.store.Get(key)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	type copyOf struct {
		from  string
		e     kv.Entry
		found bool
		err   error
	}
	epoch := meta.Epoch().String()
	copies := make(chan copyOf, len(replicas))
	for _, to := range replicas {
		go func() {
			e, ok, err := s.readCopy(r.Context(), to, key, epoch)
			copies <- copyOf{to, e, ok, err}
		}()
	}
	var missing []string
	for range replicas {
		c := <-copies
		switch {
		case c.err != nil:
			missing = append(missing, fmt.Sprintf("%s (%v)", c.from, c.err))
		case c.found && (!found || c.e.Version > best.Version):
			best, found = c.e, true
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("key %q: replicas %s did not confirm this server still owns it", key, strings.Join(missing, ", ")),
			http.StatusServiceUnavailable)
		return
	}
	writeEntry(w, best, found)
}

// readCopy fetches replica to's copy of key; a tombstone comes back as a
// found, deleted entry, so it outranks older values.
func (s *Server) readCopy(ctx context.Context, to, key, epoch string) (kv.Entry, bool, error) {
	resp, err := s.peerRequest(ctx, http.MethodGet, to, KeyPath("/internal/kv/", key), nil,
		HeaderOwner, s.cfg.Addr, HeaderEpoch, epoch)
	if err != nil {
		return kv.Entry{}, false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, kv.MaxValueLen+1))
	if err != nil {
		return kv.Entry{}, false, fmt.Errorf("body: %w", err)
	}
	if len(b) > kv.MaxValueLen {
		return kv.Entry{}, false, fmt.Errorf("body over %d bytes", kv.MaxValueLen)
	}
	hv := resp.Header.Get(HeaderVersion)
	switch resp.StatusCode {
	case http.StatusOK:
		v, err := strconv.ParseUint(hv, 10, 64)
		if err != nil {
			return kv.Entry{}, false, fmt.Errorf("%s %q: %w", HeaderVersion, hv, err)
		}
		return kv.Entry{Value: b, Version: v}, true, nil
	case http.StatusNotFound:
		if hv == "" {
			return kv.Entry{}, false, nil // never written there
		}
		v, err := strconv.ParseUint(hv, 10, 64)
		if err != nil {
			return kv.Entry{}, false, fmt.Errorf("%s %q: %w", HeaderVersion, hv, err)
		}
		return kv.Entry{Version: v, Deleted: true}, true, nil
	default:
		return kv.Entry{}, false, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b[:min(len(b), 200)])))
	}
}

// handleRead serves GET /kv/{key}: the owner answers after its replicas
// confirm it still owns the key (confirmedRead); any other server forwards
// to the owner. There is no fallback to a replica when the owner is
// unreachable: a server that cannot reach the owner cannot tell a dead
// owner from one that is cut off from it and still taking writes, so the
// read fails (503) until the ring has replaced the owner.
func (s *Server) handleRead(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw, code: http.StatusOK}
	defer s.count("get", w)
	key := r.PathValue("key")
	if err := checkKey(key); err != nil {
		s.badRequest(w, "kv", err)
		return
	}
	meta := s.currentMeta()
	if meta == nil {
		http.Error(w, "not in a ring yet", http.StatusServiceUnavailable)
		return
	}
	resp := meta.Responsible(key)
	if tooSmall(w, meta, resp) {
		return
	}
	if resp[0] != s.cfg.Addr {
		s.forward(w, r, resp[0], nil)
		return
	}
	if !s.leased(w) {
		return
	}
	s.confirmedRead(w, r, meta, key, resp[1:])
}

// tooSmall answers 503 when the ring holds fewer servers than a key needs
// (R+1): a write there could not survive R failures, and a ring that
// small with R+1 > n/2 is the cut-off side of a partition, whose reads may
// be stale. With R+1 more than half of the servers, at most one side of
// a partition serves.
func tooSmall(w http.ResponseWriter, meta *membership.Metadata, resp []string) bool {
	if len(resp) >= meta.Replicas+1 {
		return false
	}
	w.Header().Set("Retry-After", "1")
	http.Error(w, fmt.Sprintf("the ring has %d servers, fewer than the %d (R+1) each key needs: not serving keys "+
		"(this server may be cut off from the rest of the ring)", len(meta.Servers), meta.Replicas+1), http.StatusServiceUnavailable)
	return true
}

// handleLocalRead answers an owner's confirmation (GET /internal/kv/{key}
// with the owner's address and epoch) with this server's copy, fenced like
// replication: a server whose newer metadata names another owner refuses.
func (s *Server) handleLocalRead(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if err := checkKey(key); err != nil {
		s.badRequest(w, "confirm", err)
		return
	}
	if err := s.staleOwner(r, key); errors.Is(err, errStaleOwner) {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	} else if err != nil {
		s.badRequest(w, "confirm", err)
		return
	}
	e, ok, err := s.store.Get(key)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeEntry(w, e, ok)
}

// writeEntry answers a read with e; a tombstone is 404 with its version,
// so a reader comparing copies can tell a delete from a key never written.
func writeEntry(w http.ResponseWriter, e kv.Entry, ok bool) {
	switch {
	case !ok:
		http.Error(w, "not found", http.StatusNotFound)
	case e.Deleted:
		w.Header().Set(HeaderVersion, strconv.FormatUint(e.Version, 10))
		http.Error(w, "not found", http.StatusNotFound)
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set(HeaderVersion, strconv.FormatUint(e.Version, 10))
		w.Write(e.Value)
	}
}
