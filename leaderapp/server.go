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
	now     func() time.Time
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
	if cfg.OnApply == nil {
		cfg.OnApply = func(Applied) {}
	}
	return &Server{cfg: cfg, store: NewStore(cfg.MaxStoreBytes), role: NewRole(cfg.Name, cfg.Stale), now: time.Now}, nil
}

// Store is the replica's data.
func (s *Server) Store() *Store { return s.store }

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

// write applies a write as the leader of term: the CPU it costs, the
// local store, then every follower; it succeeds only when all of them
// applied it. A follower's fenced refusal raises this replica's fence: it
// stops acting as leader.
func (s *Server) write(ctx context.Context, key string, val []byte, term int64) (uint64, error) {
	Work(s.cfg.WriteWork)
	ver := Version{Seq: s.store.Next()}
	if s.cfg.Fencing {
		ver.Term = uint64(term) // known: roleTerm makes a leader of unknown term leaderless
	}
	seq := ver.Seq
	if err := s.apply(key, val, ver, term, Leader, s.cfg.Name); err != nil {
		return 0, err
	}
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
// knows a newer term raises this replica's fence instead; one that does
// not answer within the stale period learns the term from the first
// write.
func (s *Server) announce(ctx context.Context, term int64) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Stale)
	defer cancel()
	var wg sync.WaitGroup
	for name, base := range s.cfg.Peers {
		if name == s.cfg.Name {
			continue
		}
		wg.Go(func() {
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
