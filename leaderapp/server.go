package leaderapp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
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
	HeaderLeader    = "X-Leader" // on /internal/apply: the sending leader; on a write's answer: the leader that applied it
	HeaderSeq       = "X-Seq"    // the write's sequence number
	HeaderTerm      = "X-Term"   // the term of the leader that numbered the write (fencing)
	HeaderFence     = "X-Fence"  // on a 409: the newest term the refusing replica has seen
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
	// Fencing orders writes by their leader's term and refuses those of a
	// term older than one the replica has seen (fence.go); off, a
	// follower takes a write from whichever replica its sidecar names.
	Fencing bool
	// OnApply, if set, is told of every write this replica applies.
	OnApply func(Applied)
	Log     *slog.Logger
}

// Applied is a write a replica applied: as the leader that numbered it,
// or as a follower of Leader. Term is that leader's term as its sidecar
// reported it (-1: not reported), with fencing on or off.
type Applied struct {
	At      time.Time
	Key     string
	Version Version
	Term    int64
	As      Kind
	Leader  string
}

// peerTimeout bounds a request to the sidecar or a peer when Config.Client
// sets no client of its own (or one without a timeout, for announce).
const peerTimeout = 2 * time.Second

// Server is one replica: its store, its role and its HTTP API.
type Server struct {
	cfg   Config
	store *Store
	fence Fence
	// announced is 1 + the term this replica last announced as leader.
	announced atomic.Int64
	// applyMu makes the fence check and the store's apply one step: a
	// write of an older term must not land after a newer one was taken.
	applyMu sync.Mutex
	mu      sync.Mutex
	role    *Role
	// followed is the last leader other than this replica its sidecar
	// named: the one a new term most likely deposed (announce).
	followed string
	now      func() time.Time
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
		cfg.Client = &http.Client{Timeout: peerTimeout}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.OnApply == nil {
		cfg.OnApply = func(Applied) {}
	}
	return &Server{cfg: cfg, store: NewStore(cfg.MaxStoreBytes), role: NewRole(cfg.Name, cfg.Stale), now: time.Now}, nil
}

// Store is the replica's data.
func (s *Server) Store() *Store { return s.store }

// Handler serves GET and PUT /kv/{key}, GET /role and, for the leader,
// PUT /internal/apply/{key}.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /kv/{key}", s.handleGet)
	mux.HandleFunc("PUT /kv/{key}", s.handlePut)
	mux.HandleFunc("PUT /internal/apply/{key}", s.handleApply)
	mux.HandleFunc("PUT /internal/fence", s.handleFence)
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
	val, ver, ok := s.store.Get(key)
	if !ok {
		http.Error(w, "no such key", http.StatusNotFound)
		return
	}
	w.Header().Set(HeaderSeq, strconv.FormatUint(ver.Seq, 10))
	w.Header().Set(HeaderTerm, strconv.FormatUint(ver.Term, 10))
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
	k, leader, term := s.roleTerm()
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
		seq, err := s.write(r.Context(), key, val, term)
		if full := (*FullError)(nil); errors.As(err, &full) {
			http.Error(w, err.Error(), http.StatusInsufficientStorage)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set(HeaderSeq, strconv.FormatUint(seq, 10))
		w.Header().Set(HeaderLeader, s.cfg.Name)
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
	for _, h := range []string{HeaderSeq, HeaderLeader, "Content-Type"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, io.LimitReader(resp.Body, 64<<10))
}
