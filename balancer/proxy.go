package balancer

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringside/ringside/balancer/pick"
	"github.com/ringside/ringside/internal/weightfeed"
)

// Balancer is the weighted reverse proxy of seed 004: each request goes to
// a worker chosen by the picker over the current table. The table is
// immutable and swapped atomically when a weight feed message arrives, so
// picks never take a lock (except smooth-wrr's own).
type Balancer struct {
	algo        string
	tuning      pick.Tuning
	start       time.Time     // the pickers' clock counts from here
	probes      chan struct{} // one slot per probe in flight
	probeClient *http.Client
	retries     int
	log         *slog.Logger
	table       atomic.Pointer[table]
	proxy       *httputil.ReverseProxy

	mu       sync.Mutex
	counters map[string]*counters // by worker ID; kept across table swaps

	feedAccepted, feedRejected atomic.Uint64
}

type upstream struct {
	weightfeed.Worker
	c *counters
}

type table struct {
	addrs     map[string]bool // every upstream's address
	seq       uint64
	upstreams []upstream
	picker    pick.Picker
	// What the picker learns from, found once per table rather than by
	// a type assertion on every answered request.
	observer         pick.Observer
	prober           pick.Prober
	readsLoadReports bool
}

// counters are a worker's, kept by ID across table swaps: what the
// pickers learned (Load) and what the agent is told.
type counters struct {
	pick.Load
	requests, failures atomic.Uint64
}

// Options configure a Balancer.
type Options struct {
	Algorithm string // one of pick.Algorithms; default weighted-random
	// Retries is how many other workers an idempotent request (GET, HEAD,
	// OPTIONS, or one with an Idempotency-Key) tries after a worker fails
	// to answer. Default 2; negative disables.
	Retries   int
	Transport *http.Transport // default: NewTransport()
	Log       *slog.Logger
	Tuning    pick.Tuning // the latency- and load-aware pickers' parameters
}

// NewTransport is tuned for one proxy in front of a few busy workers: the
// default MaxIdleConnsPerHost of 2 makes every burst open (and leave in
// TIME_WAIT) fresh connections until ports run out.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		ForceAttemptHTTP2:     false,
	}
}

// New returns a balancer with an empty table: it answers 503 until the
// first Update.
func New(o Options) (*Balancer, error) {
	if o.Algorithm == "" {
		o.Algorithm = pick.WeightedRandom
	}
	if _, err := pick.NewPicker(o.Algorithm, nil, pick.Inputs{Tuning: o.Tuning}); err != nil {
		return nil, err
	}
	if o.Retries == 0 {
		o.Retries = 2
	}
	if o.Transport == nil {
		o.Transport = NewTransport()
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	b := &Balancer{algo: o.Algorithm, retries: max(o.Retries, 0), log: o.Log, counters: map[string]*counters{},
		tuning: o.Tuning.WithDefaults(), start: time.Now(), probes: make(chan struct{}, maxProbes)}
	b.probeClient = &http.Client{Transport: o.Transport}
	b.proxy = &httputil.ReverseProxy{
		// The transport picks the worker; Rewrite only makes the request
		// an outbound one.
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "worker"
			r.SetXForwarded()
		},
		Transport: &pickingTransport{b: b, next: o.Transport},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			status := http.StatusBadGateway
			if errors.Is(err, errNoWorker) {
				status = http.StatusServiceUnavailable
			}
			http.Error(w, err.Error(), status)
		},
		// Pooled copy buffers: without them every request allocates 32 KiB.
		BufferPool: bufferPool{},
	}
	return b, nil
}

var errNoWorker = errors.New("no worker can take the request (none known, or all drained)")

// Update installs a validated weights message as the new table. A message
// older than the current one is ignored; an invalid one is rejected and
// the current table stays.
func (b *Balancer) Update(m weightfeed.Weights) error { return b.install(m, true) }

// Seq is the sequence number of the table in force.
func (b *Balancer) Seq() uint64 {
	if t := b.table.Load(); t != nil {
		return t.seq
	}
	return 0
}

// install is Update; checkSeq false accepts any sequence number, for the
// first message on a new feed connection: a restarted agent counts from 1
// again and must not be ignored until it catches up.
func (b *Balancer) install(m weightfeed.Weights, checkSeq bool) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if cur := b.table.Load(); checkSeq && cur != nil && m.Seq != 0 && m.Seq < cur.seq {
		return fmt.Errorf("weights seq %d is older than the table's %d", m.Seq, cur.seq)
	}
	t := &table{seq: m.Seq, upstreams: make([]upstream, len(m.Workers)), addrs: make(map[string]bool, len(m.Workers))}
	weights := make([]float64, len(m.Workers))
	b.mu.Lock()
	in := make(map[string]bool, len(m.Workers))
	for i, w := range m.Workers {
		c := b.counters[w.ID]
		if c == nil {
			c = &counters{}
			b.counters[w.ID] = c
		}
		t.upstreams[i] = upstream{Worker: w, c: c}
		t.addrs[w.Addr] = true
		weights[i] = w.Weight
		in[w.ID] = true
	}
	// Forget the workers that left once their last request is done: the
	// state stays bounded by the workers in the table plus those still
	// draining, which the agent must keep seeing as busy.
	for id, c := range b.counters {
		if !in[id] && c.Active.Load() <= 0 {
			delete(b.counters, id)
		}
	}
	b.mu.Unlock()
	loads := make([]*pick.Load, len(t.upstreams))
	for i, up := range t.upstreams {
		loads[i] = &up.c.Load
	}
	p, err := pick.NewPicker(b.algo, weights, pick.Inputs{Loads: loads, Now: b.now, Tuning: b.tuning})
	if err != nil {
		return err
	}
	t.picker = p
	t.observer, _ = p.(pick.Observer)
	t.prober, _ = p.(pick.Prober)
	_, t.readsLoadReports = p.(pick.LoadReportReader)
	b.table.Store(t)
	return nil
}

// serves reports whether addr is an upstream of the table in force.
func (b *Balancer) serves(addr string) bool {
	t := b.table.Load()
	return t != nil && t.addrs[addr]
}

// Workers returns the current table's workers.
func (b *Balancer) Workers() []weightfeed.Worker {
	t := b.table.Load()
	if t == nil {
		return nil
	}
	out := make([]weightfeed.Worker, len(t.upstreams))
	for i, up := range t.upstreams {
		out[i] = up.Worker
	}
	return out
}

// Tally is what the balancer has seen per worker, for the agent.
func (b *Balancer) Tally(name string) weightfeed.Tally {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := weightfeed.Tally{Type: weightfeed.TypeTally, Balancer: name}
	for id, c := range b.counters {
		r.Workers = append(r.Workers, weightfeed.WorkerTally{
			ID: id, Active: c.Active.Load(), Requests: c.requests.Load(), Failures: c.failures.Load(),
		})
	}
	slices.SortFunc(r.Workers, func(x, y weightfeed.WorkerTally) int { return strings.Compare(x.ID, y.ID) })
	return r
}

func (b *Balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.proxy.ServeHTTP(w, r) }

// pickingTransport chooses the worker for each attempt, counts requests in
// flight until the response body is closed, and retries an idempotent
// request on another worker when one fails to answer at all.
type pickingTransport struct {
	b    *Balancer
	next http.RoundTripper
}

func (p *pickingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	b := p.b
	t := b.table.Load()
	if t == nil {
		return nil, errNoWorker
	}
	attempts := 1
	if idempotent(r) {
		attempts += b.retries
	}
	var resp *http.Response
	err := b.try(t, attempts, func(i int, up upstream, start time.Duration, retry bool) error {
		out := r
		if retry {
			out = r.Clone(r.Context())
			if r.GetBody != nil {
				body, err := r.GetBody()
				if err != nil {
					return stop(err)
				}
				out.Body = body
			}
		}
		out.URL.Host, out.Host = up.Addr, ""
		res, err := p.next.RoundTrip(out)
		if err != nil {
			if r.Context().Err() != nil {
				return stop(err)
			}
			return err
		}
		b.answered(t, i, res.Header)
		res.Body = &doneBody{ReadCloser: res.Body, t: t, i: i, start: start, b: b}
		resp = res
		return nil
	})
	return resp, err
}

// doneBody ends a request when its response body is closed: one fewer in
// flight, and its latency observed.
type doneBody struct {
	io.ReadCloser
	t     *table
	i     int
	start time.Duration
	b     *Balancer
	once  sync.Once
}

func (d *doneBody) Close() error {
	d.once.Do(func() { d.b.done(d.t, d.i, d.start, false) })
	return d.ReadCloser.Close()
}

// Static builds a weights message from fixed workers, for running the
// balancer without an agent (experiments' baselines, tests).
func Static(addrs []string, weights []float64) weightfeed.Weights {
	m := weightfeed.Weights{Type: weightfeed.TypeWeights, Seq: 1}
	for i, a := range addrs {
		m.Workers = append(m.Workers, weightfeed.Worker{
			ID: fmt.Sprintf("w%d", i), Addr: a, Score: min(weights[i], 100), Category: weightfeed.CategoryLow,
			State: weightfeed.StateActive, Weight: weights[i],
		})
	}
	return m
}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// bufferPool lends httputil.ReverseProxy its copy buffers.
type bufferPool struct{}

func (bufferPool) Get() []byte  { return *copyBuffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }
