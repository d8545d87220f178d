package server

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/kv"
	"github.com/ringside/ringside/ring/membership"
)

// Headers of the internal protocol.
const (
	HeaderVersion = "X-Ringside-Version" // entry version on replication and reads
	HeaderOwner   = "X-Ringside-Owner"   // the owner sending a replication
	HeaderEpoch   = "X-Ringside-Epoch"   // its metadata's round.version
	HeaderHops    = "X-Ringside-Hops"    // forwarding depth, to stop loops on stale metadata
	HeaderSecret  = "X-Ringside-Secret"  // the cluster secret, on every peer-only request
	maxHops       = 2
	// maxTransfers bounds the data moves a server accepts at once: each
	// buffers up to two chunks.
	maxTransfers = 4
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /kv/{key...}", s.handleWrite)
	mux.HandleFunc("DELETE /kv/{key...}", s.handleWrite)
	mux.HandleFunc("GET /kv/{key...}", s.handleRead)
	// Peer-only endpoints: they bypass the owner, set versions, change
	// the ring. Only a server with the cluster secret may call them.
	mux.HandleFunc("GET /internal/kv/{key...}", s.peerOnly(s.handleLocalRead))
	mux.HandleFunc("PUT /internal/replicate/{key...}", s.peerOnly(s.handleReplicate))
	mux.HandleFunc("DELETE /internal/replicate/{key...}", s.peerOnly(s.handleReplicate))
	mux.HandleFunc("POST /internal/transfer", s.peerOnly(s.handleTransfer))
	mux.HandleFunc("POST /internal/pull", s.peerOnly(s.handlePull))
	mux.HandleFunc("PUT /internal/metadata", s.peerOnly(s.handleMetadata))
	mux.HandleFunc("POST /internal/join", s.peerOnly(s.handleJoin))
	// Read-only views, open: smart clients read the ring, experiments the status.
	mux.HandleFunc("GET /internal/ring", s.handleRing)
	mux.HandleFunc("GET /internal/status", s.handleStatus)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if s.currentMeta() == nil {
			http.Error(w, "not in a ring yet", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	return mux
}

// peerOnly refuses a request that does not carry the cluster secret.
func (s *Server) peerOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(HeaderSecret)
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Secret)) != 1 {
			s.m.malformed.WithLabelValues("unauthorised").Inc()
			http.Error(w, "peer-only endpoint: the "+HeaderSecret+" header is missing or wrong (servers share RINGNODE_SECRET)", http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

func (s *Server) currentMeta() *membership.Metadata {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.meta
}

func (s *Server) badRequest(w http.ResponseWriter, what string, err error) {
	s.m.malformed.WithLabelValues(what).Inc()
	http.Error(w, what+": "+err.Error(), http.StatusBadRequest)
}

// statusWriter remembers the status code for the request metric.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) { w.code = code; w.ResponseWriter.WriteHeader(code) }

func (s *Server) count(op string, w *statusWriter) {
	s.m.requests.WithLabelValues(op, strconv.Itoa(w.code)).Inc()
}

// KeyPath is the request path of key under prefix ("/kv/",
// "/internal/replicate/"). Keys are any bytes: every hop escapes them, so
// "a?b" stays one key and "%zz" stays a key, not a broken escape.
func KeyPath(prefix, key string) string { return prefix + kv.EscapeKey(key) }

func checkKey(key string) error {
	if key == "" {
		return errors.New("key: empty")
	}
	if len(key) > kv.MaxKeyLen {
		return fmt.Errorf("key: %d bytes, limit %d", len(key), kv.MaxKeyLen)
	}
	return nil
}

func hops(r *http.Request) int {
	n, _ := strconv.Atoi(r.Header.Get(HeaderHops))
	return n
}

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
	epoch := fmt.Sprintf("%d.%d", meta.Round, meta.Version)
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
	var round, version uint64
	if _, err := fmt.Sscanf(r.Header.Get(HeaderEpoch), "%d.%d", &round, &version); err != nil || owner == "" {
		return fmt.Errorf("%s and %s: want the sender's address and metadata round.version", HeaderOwner, HeaderEpoch)
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

var errStaleOwner = errors.New("stale owner")

func (s *Server) forward(w http.ResponseWriter, r *http.Request, to string, body []byte) {
	if hops(r) >= maxHops {
		http.Error(w, "forwarding loop: the ring metadata is changing, retry", http.StatusServiceUnavailable)
		return
	}
	resp, err := s.proxy(r.Context(), r.Method, to, KeyPath("/kv/", r.PathValue("key")), body, hops(r)+1)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("owner %s unreachable: %v", to, err), http.StatusServiceUnavailable)
		return
	}
	copyResponse(w, resp)
}

func (s *Server) proxy(ctx context.Context, method, to, path string, body []byte, hop int) (*http.Response, error) {
	return s.peerRequest(ctx, method, to, path, body, HeaderHops, strconv.Itoa(hop))
}

// peerRequest sends one request to server to. Addresses come from ring
// metadata, which a peer supplies: a request that cannot even be built is
// an error like any other, never a nil request. header is name, value
// pairs.
func (s *Server) peerRequest(ctx context.Context, method, to, path string, body []byte, header ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+to+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("request to %s: %w", to, err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	req.Header.Set(HeaderSecret, s.cfg.Secret)
	return s.hc.Do(req)
}

func copyResponse(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", HeaderVersion, "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
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

func (s *Server) handleReplicate(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if err := checkKey(key); err != nil {
		s.badRequest(w, "replicate", err)
		return
	}
	v, err := strconv.ParseUint(r.Header.Get(HeaderVersion), 10, 64)
	if err != nil || v == 0 {
		s.badRequest(w, "replicate", fmt.Errorf("%s: %q is not a positive version", HeaderVersion, r.Header.Get(HeaderVersion)))
		return
	}
	if err := s.staleOwner(r, key); errors.Is(err, errStaleOwner) {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	} else if err != nil {
		s.badRequest(w, "replicate", err)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, kv.MaxValueLen+1))
	if err != nil || len(body) > kv.MaxValueLen {
		s.badRequest(w, "replicate", fmt.Errorf("body: unreadable or over %d bytes", kv.MaxValueLen))
		return
	}
	if _, err := s.store.Apply(key, kv.Entry{Value: body, Version: v, Deleted: r.Method == http.MethodDelete}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleTransfer(w http.ResponseWriter, r *http.Request) {
	select {
	case s.transfers <- struct{}{}:
		defer func() { <-s.transfers }()
	default:
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("busy: %d data moves already in progress", maxTransfers), http.StatusServiceUnavailable)
		return
	}
	const limit = transferChunk + kv.MaxKeyLen + kv.MaxValueLen + 64 // a chunk plus the record that crossed it
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		s.badRequest(w, "transfer", err)
		return
	}
	if len(body) > limit {
		s.m.malformed.WithLabelValues("transfer").Inc()
		http.Error(w, fmt.Sprintf("transfer: over %d bytes", limit), http.StatusRequestEntityTooLarge)
		return
	}
	items, err := DecodeItems(body)
	if err != nil {
		s.badRequest(w, "transfer", err)
		return
	}
	for _, it := range items {
		if _, err := s.store.Apply(it.Key, it.Entry); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleMetadata(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		s.badRequest(w, "metadata", err)
		return
	}
	nm, err := membership.Decode(body)
	if err != nil {
		s.badRequest(w, "metadata", err)
		return
	}
	var applied bool
	if err := s.do(r.Context(), func() { applied = s.installMeta(nm) }); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if !applied {
		http.Error(w, "stale metadata: a newer version is in force", http.StatusConflict)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleRing(w http.ResponseWriter, r *http.Request) {
	meta := s.currentMeta()
	if meta == nil {
		http.Error(w, "not in a ring yet", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(meta.Encode())
}

// Status is the /internal/status document.
type Status struct {
	Addr        string           `json:"addr"`
	UID         string           `json:"uid"`
	Leader      string           `json:"leader"` // address, when it is a member
	LeaderUID   string           `json:"leader_uid"`
	Coordinator bool             `json:"coordinator"`
	Round       uint64           `json:"round"`
	Participant bool             `json:"participant"`
	MetaRound   uint64           `json:"meta_round"`
	MetaVersion uint64           `json:"meta_version"`
	Servers     []string         `json:"servers"`
	Keys        int              `json:"keys"`
	Moved       int64            `json:"keys_moved"`
	Sent        map[string]int64 `json:"sent"`
	Events      Events           `json:"events"`
	Time        int64            `json:"time_ns"`
}

// Snapshot returns the server's status.
func (s *Server) Snapshot() Status {
	s.mu.RLock()
	st, meta, ev := s.status, s.meta, s.events
	s.mu.RUnlock()
	out := Status{Addr: s.cfg.Addr, UID: s.self.String(), Round: st.Round, Participant: st.Participant,
		Keys: s.store.Len(), Moved: s.moved.Load(), Events: ev, Sent: map[string]int64{}, Time: time.Now().UnixNano()}
	if !st.Leader.IsZero() {
		out.LeaderUID = st.Leader.String()
		out.Coordinator = st.Leader == s.self && !st.Announcing
	}
	if meta != nil {
		out.MetaRound, out.MetaVersion, out.Servers = meta.Round, meta.Version, meta.Servers
		for _, a := range meta.Servers {
			if ring.UIDOf(a) == st.Leader {
				out.Leader = a
			}
		}
	}
	for t := range s.sent {
		if n := s.sent[t].Load(); n > 0 {
			out.Sent[typeName(ring.MsgType(t))] = n
		}
	}
	// Per-hop acknowledgement's own messages, apart from the algorithm's.
	if n := s.hopAcks.Load(); n > 0 {
		out.Sent["hop_ack"] = n
	}
	if n := s.resent.Load(); n > 0 {
		out.Sent["retransmission"] = n
	}
	return out
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(s.Snapshot())
}
