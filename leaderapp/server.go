package leaderapp

import (
	"bytes"
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Limits of what a client may send.
const (
	MaxKey   = 256
	MaxValue = 1 << 20
	// DefaultMaxStore is a replica's store budget unless configured.
	DefaultMaxStore = 256 << 20
)

// Headers of the application's protocol.
const (
	HeaderRole      = "X-Role"   // the answering replica's role
	HeaderLeader    = "X-Leader" // on /internal/apply: the sending leader
	HeaderSeq       = "X-Seq"    // the write's sequence number
	HeaderForwarded = "X-Forwarded-By"
	HeaderSecret    = "X-App-Secret" // on replica-to-replica requests
)

// Config configures a replica.
type Config struct {
	Name    string            // this replica, as the sidecar names leaders (pod name)
	Sidecar string            // the elector sidecar's base URL
	Peers   map[string]string // every replica, this one included: name → base URL
	Secret  string            // shared by the replicas; required on their requests
	// WriteWork and ReadWork are the CPU rounds (Work) a write and a read
	// cost on the replica that serves them.
	WriteWork, ReadWork int
	Poll                time.Duration // how often the sidecar is asked (default 100 ms)
	Stale               time.Duration // an answer older than this makes the replica leaderless (default 5 × Poll)
	Client              *http.Client  // for the sidecar and the peers (default: 2 s timeout)
	// MaxStoreBytes bounds the keys and values a replica holds (default
	// 256 MiB): past it, writes get 507 and the store keeps what it has.
	MaxStoreBytes int64
	Log           *slog.Logger
}

// Server is one replica: its store, its role and its HTTP API.
type Server struct {
	cfg   Config
	store *Store
	mu    sync.Mutex
	role  *Role
	now   func() time.Time
}

// New checks cfg and returns a replica.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Name == "":
		return nil, errors.New("leaderapp: a replica needs a name (the sidecar's identity for it)")
	case cfg.Sidecar == "":
		return nil, errors.New("leaderapp: a replica needs its sidecar's URL")
	case cfg.Peers[cfg.Name] == "":
		return nil, fmt.Errorf("leaderapp: the peers do not include this replica %q", cfg.Name)
	case len(cfg.Secret) < 16:
		return nil, errors.New("leaderapp: the replicas' shared secret must be at least 16 characters")
	case cfg.WriteWork < 0 || cfg.ReadWork < 0:
		return nil, errors.New("leaderapp: work rounds must not be negative")
	case cfg.MaxStoreBytes < 0:
		return nil, fmt.Errorf("leaderapp: store budget %d bytes must not be negative", cfg.MaxStoreBytes)
	case cfg.Poll < 0 || cfg.Stale < 0:
		return nil, fmt.Errorf("leaderapp: poll %s and stale %s must not be negative", cfg.Poll, cfg.Stale)
	}
	cfg.Poll = cmp.Or(cfg.Poll, 100*time.Millisecond)
	cfg.MaxStoreBytes = cmp.Or(cfg.MaxStoreBytes, DefaultMaxStore)
	cfg.Stale = cmp.Or(cfg.Stale, 5*cfg.Poll)
	if cfg.Stale < cfg.Poll {
		return nil, fmt.Errorf("leaderapp: stale %s is shorter than the poll %s: the replica would forget every leader between two answers", cfg.Stale, cfg.Poll)
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 2 * time.Second}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, store: NewStore(cfg.MaxStoreBytes), role: NewRole(cfg.Name, cfg.Stale), now: time.Now}, nil
}

// Store is the replica's data.
func (s *Server) Store() *Store { return s.store }

// Role returns the replica's role now and the leader it follows.
func (s *Server) Role() (Kind, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.role.At(s.now())
}

// Run asks the sidecar who leads every Poll until ctx ends, and logs
// every change of role.
func (s *Server) Run(ctx context.Context) {
	var was Kind
	for {
		if leader, err := s.askSidecar(ctx); err == nil {
			s.mu.Lock()
			s.role.Observe(s.now(), leader)
			s.mu.Unlock()
		}
		if k, leader := s.Role(); k != was {
			s.cfg.Log.Info("role", "role", k, "leader", leader)
			was = k
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.cfg.Poll):
		}
	}
}

func (s *Server) askSidecar(ctx context.Context) (string, error) {
	return AskSidecar(ctx, s.cfg.Client, s.cfg.Sidecar)
}

// AskSidecar returns the leader an elector sidecar names ("" for none).
func AskSidecar(ctx context.Context, hc *http.Client, sidecar string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, sidecar+"/", nil)
	if err != nil {
		return "", fmt.Errorf("sidecar %q: %w", sidecar, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("sidecar %s: %s", sidecar, resp.Status)
	}
	var ans struct {
		Name string `json:"name"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&ans); err != nil {
		return "", fmt.Errorf("sidecar %s: %w", sidecar, err)
	}
	return ans.Name, nil
}

// Handler serves GET and PUT /kv/{key}, GET /role and, for the leader,
// PUT /internal/apply/{key}.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /kv/{key}", s.handleGet)
	mux.HandleFunc("PUT /kv/{key}", s.handlePut)
	mux.HandleFunc("PUT /internal/apply/{key}", s.handleApply)
	mux.HandleFunc("GET /role", func(w http.ResponseWriter, r *http.Request) {
		k, leader := s.Role()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"name": s.cfg.Name, "role": k, "leader": leader, "keys": s.store.Len()})
	})
	return mux
}

func checkKey(key string) error {
	if key == "" || len(key) > MaxKey {
		return fmt.Errorf("key of %d bytes: want 1 to %d", len(key), MaxKey)
	}
	return nil
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if err := checkKey(key); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	Work(s.cfg.ReadWork)
	k, _ := s.Role()
	w.Header().Set(HeaderRole, string(k))
	val, seq, ok := s.store.Get(key)
	if !ok {
		http.Error(w, "no such key", http.StatusNotFound)
		return
	}
	w.Header().Set(HeaderSeq, strconv.FormatUint(seq, 10))
	w.Write(val)
}

// readValue reads a bounded body, or answers the error itself.
func readValue(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	val, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxValue))
	if err != nil {
		http.Error(w, fmt.Sprintf("value: %v (at most %d bytes)", err, MaxValue), http.StatusRequestEntityTooLarge)
		return nil, false
	}
	return val, true
}

func (s *Server) handlePut(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if err := checkKey(key); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	val, ok := readValue(w, r)
	if !ok {
		return
	}
	k, leader := s.Role()
	w.Header().Set(HeaderRole, string(k))
	switch k {
	case Leaderless:
		http.Error(w, "no leader: the election is under way; retry", http.StatusServiceUnavailable)
	case Follower:
		if r.Header.Get(HeaderForwarded) != "" {
			// Forwarded by a replica that thought this one leads: the
			// leader changed under the write. Never forward twice.
			http.Error(w, fmt.Sprintf("%s is not the leader (%s is): the leader changed; retry", s.cfg.Name, leader), http.StatusServiceUnavailable)
			return
		}
		s.forward(w, r.Context(), leader, key, val)
	case Leader:
		seq, err := s.write(r.Context(), key, val)
		if full := (*FullError)(nil); errors.As(err, &full) {
			http.Error(w, err.Error(), http.StatusInsufficientStorage)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set(HeaderSeq, strconv.FormatUint(seq, 10))
		w.WriteHeader(http.StatusNoContent)
	}
}

// forward sends a write to the leader and relays its answer.
func (s *Server) forward(w http.ResponseWriter, ctx context.Context, leader, key string, val []byte) {
	base := s.cfg.Peers[leader]
	if base == "" {
		http.Error(w, fmt.Sprintf("the leader %q is not a known replica", leader), http.StatusServiceUnavailable)
		return
	}
	resp, err := s.peer(ctx, base+"/kv/"+url.PathEscape(key), val, HeaderForwarded, s.cfg.Name)
	if err != nil {
		http.Error(w, fmt.Sprintf("forward to the leader %s: %v", leader, err), http.StatusServiceUnavailable)
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{HeaderSeq, "Content-Type"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, io.LimitReader(resp.Body, 64<<10))
}

// write applies a write as the leader: the CPU it costs, the local store,
// then every follower; it succeeds only when all of them applied it.
func (s *Server) write(ctx context.Context, key string, val []byte) (uint64, error) {
	Work(s.cfg.WriteWork)
	seq := s.store.Next()
	if _, err := s.store.Apply(key, val, seq); err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(s.cfg.Peers))
	for name, base := range s.cfg.Peers {
		if name == s.cfg.Name {
			continue
		}
		wg.Go(func() {
			resp, err := s.peer(ctx, base+"/internal/apply/"+url.PathEscape(key), val, HeaderLeader, s.cfg.Name, HeaderSeq, strconv.FormatUint(seq, 10))
			if err != nil {
				errs <- fmt.Errorf("follower %s: %w", name, err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
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
		return 0, fmt.Errorf("write not acknowledged: %w", errors.Join(all...))
	}
	return seq, nil
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

// handleApply takes a write from the leader this replica follows; from
// anyone else (a deposed leader that has not noticed yet) it is refused,
// which fails that write.
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
	val, ok := readValue(w, r)
	if !ok {
		return
	}
	from := r.Header.Get(HeaderLeader)
	if k, leader := s.Role(); k != Follower || leader != from {
		http.Error(w, fmt.Sprintf("%s does not follow %q (role %s, leader %q)", s.cfg.Name, from, k, leader), http.StatusConflict)
		return
	}
	if _, err := s.store.Apply(key, val, seq); err != nil {
		// The leader's write fails with it: acknowledged means every
		// replica holds it.
		http.Error(w, err.Error(), http.StatusInsufficientStorage)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
