// Package server is ringnode: a key-value server that is a member of the
// Chang–Roberts ring and, when elected, the coordinator (the paper's ECS).
// It is the shell of two pure cores that the simulator drives too: the
// election (ring.Node) and the coordinator role (ring/coordinator). Every
// input to them — a peer message, an undeliverable one, a timer, a join,
// a metadata push — runs to completion under one mutex (lmu) on the
// goroutine that received it, and what the cores return is sent before
// the lock is released; handlers read published state (metadata, status,
// events) under a separate RWMutex (mu).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ringside/ringside/internal/accept"
	"github.com/ringside/ringside/internal/serve"
	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/coordinator"
	"github.com/ringside/ringside/ring/kv"
	"github.com/ringside/ringside/ring/lease"
	"github.com/ringside/ringside/ring/membership"
	"github.com/ringside/ringside/ring/transport"
	"github.com/ringside/ringside/ring/wire"
)

// Config configures a server. Addr is its identity: UID = MD5(Addr).
type Config struct {
	Addr   string   // advertised ip:port, for peers and clients
	Listen string   // bind address (default Addr)
	Join   []string // seed servers; none reachable → this server bootstraps the ring
	Dir    string   // data directory

	// Replicas is R, the successors that hold a copy of each key (zero:
	// none, the owner's copy only; cmd/ringnode's default is 2).
	Replicas   int
	CacheBytes int64 // value cache budget (kv.Options.CacheBytes)
	// Secret is the cluster secret every server of the ring shares;
	// peer-only endpoints refuse requests without it.
	Secret string
	Fsync  string // kv.FsyncNever, FsyncInterval or FsyncAlways

	SuspectTimeout    time.Duration // no heartbeat from the coordinator this long → election
	SuspectJitter     time.Duration
	HeartbeatInterval time.Duration
	HopBound          time.Duration // per-hop bound for the election-restart timeout
	AckTimeout        time.Duration // per-hop acknowledgement (ring.Config.AckTimeout); 0: off
	JoinTimeout       time.Duration
	// SpinRead is how long a connection that delivered an ELECTION polls
	// for the round's ELECTED before its reader sleeps (0: never;
	// transport.SpinAfterElection). At most transport.MaxSpin.
	SpinRead time.Duration
	// Election is the registered election algorithm the server runs
	// (ring.Lookup; default Chang–Roberts). Every server of a ring runs
	// the same: a server asking to join with another is refused.
	Election string

	// CrashOnElection is a fault to inject on purpose: the server dies
	// (Exit) as soon as it receives an ELECTION message, so the message is
	// lost with it and the ring must recover by the election timeout.
	CrashOnElection bool
	Exit            func(code int) // default os.Exit

	// Network is what the server listens and dials on: TCP by default;
	// tests pass an in-memory one (internal/memnet).
	Network Network

	Log *slog.Logger
}

// Defaults fills unset fields with seed 002's values.
func (c *Config) Defaults() {
	if c.Listen == "" {
		c.Listen = c.Addr
	}
	if c.SuspectTimeout == 0 {
		c.SuspectTimeout = ring.DefaultSuspectTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 100 * time.Millisecond
	}
	if c.HopBound == 0 {
		c.HopBound = 10 * time.Millisecond
	}
	if c.JoinTimeout == 0 {
		c.JoinTimeout = 5 * time.Second
	}
	if c.Election == "" {
		c.Election = ring.ChangRoberts
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Exit == nil {
		c.Exit = os.Exit
	}
	if c.Network == nil {
		c.Network = tcpNetwork{}
	}
}

// Network is where a server is reached and reaches its peers, for the ring
// transport and for HTTP alike.
type Network interface {
	Listen(addr string) (net.Listener, error)
	DialContext(ctx context.Context, addr string) (net.Conn, error)
}

type tcpNetwork struct{}

func (tcpNetwork) Listen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }

func (tcpNetwork) DialContext(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: time.Second}
	return d.DialContext(ctx, "tcp", addr)
}

// Events are wall-clock instants (Unix ns, 0 = never) of what this server
// saw last; experiments read them through /internal/status to time a
// failover across processes on one host.
type Events struct {
	Suspected     int64 `json:"suspected_ns"`      // its detector fired and it started an election
	ElectionSent  int64 `json:"election_sent_ns"`  // first ELECTION it sent in its current round
	Announced     int64 `json:"announced_ns"`      // its own ELECTION came back (read): it sent ELECTED
	Won           int64 `json:"won_ns"`            // its ELECTED came back (read): the election ended (it won, or named the winner)
	LeaderKnown   int64 `json:"leader_known_ns"`   // it learned its current leader
	MetaApplied   int64 `json:"meta_applied_ns"`   // it installed its current metadata
	RebalanceDone int64 `json:"rebalance_done_ns"` // its last data move finished
	// A duration, not an instant: how long its last ELECTED forward took
	// from the read of the message it answered to the write's return —
	// the server's own share of an ELECTED hop, the rest being the
	// network and the wake-up of the next server.
	ElectedForward int64 `json:"elected_forward_ns"`
}

// Server is one ringnode.
type Server struct {
	cfg   Config
	alg   ring.Algorithm
	self  ring.UID
	log   *slog.Logger
	store *kv.Store
	tr    *transport.Transport
	ln    net.Listener
	http  *http.Server
	hc    *http.Client
	clock versionClock
	reg   *prometheus.Registry
	m     metrics
	start time.Time

	stop      context.CancelFunc
	done      sync.WaitGroup
	rebal     chan struct{}
	transfers chan struct{} // one slot per data move being received
	timer     *time.Timer

	// lmu guards the election state: the ring.Elector and the coordinator
	// role. Every input — a peer message, an undeliverable one, a timer,
	// a metadata change — takes it, runs to completion and re-arms the
	// timer. Handling a message on the goroutine that read it keeps one
	// hop to a read, a Step and a write, with no hand-offs.
	lmu sync.Mutex
	// State guarded by lmu.
	node      ring.Elector
	role      *coordinator.Coordinator // the coordinator (ECS) core
	last      ring.Status
	seen      ring.Stats // the node's counters at the last observe
	sentRound uint64
	// When the ELECTION or ELECTED being handled was read (zero outside
	// one, cleared after its observe): an ELECTED's forward is timed from
	// it, and the ELECTED round's ends are stamped with it.
	readAt time.Time

	// Shared state, read by handlers.
	mu      sync.RWMutex
	meta    *membership.Metadata
	status  ring.Status
	events  Events
	moved   atomic.Int64
	sent    [wire.MsgHeartbeatAck + 1]atomic.Int64
	hopAcks atomic.Int64 // per-hop acknowledgements sent
	resent  atomic.Int64 // retransmissions for want of one
	stopped atomic.Bool
	// rejoining is set while rejoin runs.
	rejoining atomic.Bool
	// settled is set once this server has pulled what it is responsible
	// for from the other members (settle.go).
	settled atomic.Bool
	// rebalancedEpoch is the metadata under which this server last
	// finished its data moves (guarded by mu, set once hasRebalanced).
	rebalancedEpoch membership.Epoch
	hasRebalanced   bool

	leaseMu sync.Mutex
	lease   *lease.Lease // the serving lease (lease.go), guarded by leaseMu
	// unanswered holds each asker's latest lease round not yet answered,
	// guarded by leaseMu: the answer rides on this server's next ask to
	// it. Only members reach the transport, so it is as large as the ring.
	unanswered map[ring.UID]uint64
	askNow     chan struct{}

	joins atomic.Uint64        // rejoins so far: a settle that spans one does not count
	lost  map[string]time.Time // servers the ring lost, when (antientropy.go)
}

// checkDurations refuses a negative setting at start. The election's
// state machine checks its own only once the server holds ring metadata,
// and a server that failed it there stayed up with no elector at all.
func (c *Config) checkDurations() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"suspect timeout", c.SuspectTimeout}, {"suspect jitter", c.SuspectJitter}, {"heartbeat interval", c.HeartbeatInterval},
		{"hop bound", c.HopBound}, {"ack timeout", c.AckTimeout}, {"join timeout", c.JoinTimeout}, {"spin read", c.SpinRead},
	} {
		if d.v < 0 {
			return fmt.Errorf("%s %v: must not be negative", d.name, d.v)
		}
	}
	if c.SpinRead > transport.MaxSpin {
		return fmt.Errorf("spin read %v: at most %v (while a connection polls, the others' frames may wait that long)", c.SpinRead, transport.MaxSpin)
	}
	return nil
}

// New opens the store and binds the listener; Run starts serving.
func New(cfg Config) (*Server, error) {
	cfg.Defaults()
	if err := membership.CheckAddr(cfg.Addr); err != nil {
		return nil, fmt.Errorf("addr: %w", err)
	}
	if err := cfg.checkDurations(); err != nil {
		return nil, err
	}
	alg, err := ring.Lookup(cfg.Election)
	if err != nil {
		return nil, err
	}
	role, err := coordinator.New(cfg.Addr, cfg.SuspectTimeout)
	if err != nil {
		return nil, err
	}
	role.Guard()
	// The serving lease ends two heartbeats short of the suspect timeout:
	// a server cut off with a minority has stopped serving before the
	// other side, which last heard from it at most a heartbeat before the
	// cut, can remove it or elect past it. It is renewed every heartbeat.
	if cfg.SuspectTimeout <= 3*cfg.HeartbeatInterval {
		return nil, fmt.Errorf("suspect timeout %v: must exceed three heartbeat intervals (%v): the serving lease, renewed every heartbeat, ends two short of it",
			cfg.SuspectTimeout, cfg.HeartbeatInterval)
	}
	sl, err := lease.New(cfg.Addr, cfg.SuspectTimeout-2*cfg.HeartbeatInterval)
	if err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		return nil, errors.New("data directory: not set")
	}
	if cfg.Replicas < 0 || cfg.Replicas > 16 {
		return nil, fmt.Errorf("replicas %d: want 0…16", cfg.Replicas)
	}
	if len(cfg.Secret) < 16 {
		return nil, errors.New("cluster secret: at least 16 characters, the same on every server (--secret, RINGNODE_SECRET)")
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	store, err := kv.Open(filepath.Join(cfg.Dir, "kv.log"), kv.Options{CacheBytes: cfg.CacheBytes, Fsync: cfg.Fsync}, cfg.Log)
	if err != nil {
		return nil, err
	}
	ln, err := cfg.Network.Listen(cfg.Listen)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	ln = accept.Bound(ln)
	s := &Server{
		cfg: cfg, alg: alg, self: ring.UIDOf(cfg.Addr), role: role, lease: sl, log: cfg.Log.With("server", cfg.Addr), store: store, ln: ln,
		hc: &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64,
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return cfg.Network.DialContext(ctx, addr) }}},
		rebal:      make(chan struct{}, 1),
		askNow:     make(chan struct{}, 1),
		unanswered: map[ring.UID]uint64{},
		transfers:  make(chan struct{}, maxTransfers),
		start:      time.Now(),
		reg:        prometheus.NewRegistry(),
	}
	s.m = newMetrics(s.reg)
	s.tr = transport.New(cfg.Secret, cfg.Network.DialContext, transport.Handler{
		Deliver: func(m ring.Message) {
			if s.onLease(m) {
				return
			}
			var at time.Time // only the election's own messages are timed
			if m.Type == ring.MsgElection || m.Type == ring.MsgElected {
				at = time.Now()
			}
			s.locked(func() {
				s.readAt = at
				s.onMessage(m)
			})
		},
		// Send may report a message unreachable while lmu is held. A lease
		// frame that did not go out confirms nothing; that is all.
		Unreachable: func(m ring.Message) {
			if m.Type != wire.MsgLeaseAsk && m.Type != wire.MsgLeaseAnswer {
				go s.locked(func() { s.onUnreachable(m) })
			}
		},
		Malformed: func(string, error) { s.m.malformed.WithLabelValues("peer").Inc() },
	}, s.log)
	s.tr.SpinAfterElection(cfg.SpinRead)
	s.http = serve.Limit(&http.Server{Handler: s.routes()})
	return s, nil
}

// Addr is the server's identity address.
func (s *Server) Addr() string { return s.cfg.Addr }

// Run joins or bootstraps the ring and serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	ctx, s.stop = context.WithCancel(ctx)
	httpLn := newChanListener(s.ln.Addr())
	s.timer = time.AfterFunc(time.Hour, func() { s.locked(s.tick) })
	s.done.Add(5)
	go func() { defer s.done.Done(); s.http.Serve(httpLn) }()
	go func() { defer s.done.Done(); s.accept(httpLn) }()
	go func() { defer s.done.Done(); s.rebalancer(ctx) }()
	go func() { defer s.done.Done(); s.syncMeta(ctx) }()
	go func() { defer s.done.Done(); s.leaseLoop(ctx) }()

	if err := s.join(ctx); err != nil {
		s.shutdown()
		return err
	}
	<-ctx.Done()
	s.shutdown()
	return nil
}

func (s *Server) shutdown() {
	if s.stopped.Swap(true) {
		return
	}
	s.stop()
	s.lmu.Lock()
	s.timer.Stop()
	s.lmu.Unlock()
	s.ln.Close()
	s.http.Close()
	s.tr.Close()
	s.done.Wait()
	s.store.Close()
}

func (s *Server) now() time.Duration { return time.Since(s.start) }
