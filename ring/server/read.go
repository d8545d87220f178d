package server

import (
	"context"
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
	epoch := fmt.Sprintf("%d.%d", meta.Round, meta.Version)
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
