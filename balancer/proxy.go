package balancer

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringside/ringside/internal/weightfeed"
)

// Balancer is the weighted reverse proxy of seed 004: each request goes to
// a worker chosen by the picker over the current table. The table is
// immutable and swapped atomically when a weight feed message arrives, so
// picks never take a lock (except smooth-wrr's own).
type Balancer struct {
	algo    string
	retries int
	log     *slog.Logger
	table   atomic.Pointer[table]
	proxy   *httputil.ReverseProxy

	mu       sync.Mutex
	counters map[string]*counters // by worker ID; kept across table swaps

	feedAccepted, feedRejected atomic.Uint64
}

type backend struct {
	weightfeed.Worker
	c *counters
}

type table struct {
	seq      uint64
	backends []backend
	picker   Picker
}

type counters struct {
	active             atomic.Int64
	requests, failures atomic.Uint64
}

// Options configure a Balancer.
type Options struct {
	Algorithm string // one of Algorithms; default weighted-random
	// Retries is how many other workers an idempotent request (GET, HEAD,
	// OPTIONS, or one with an Idempotency-Key) tries after a worker fails
	// to answer. Default 2; negative disables.
	Retries   int
	Transport *http.Transport // default: NewTransport()
	Log       *slog.Logger
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
		o.Algorithm = WeightedRandom
	}
	if _, err := NewPicker(o.Algorithm, nil, func(int) int64 { return 0 }); err != nil {
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
	b := &Balancer{algo: o.Algorithm, retries: max(o.Retries, 0), log: o.Log, counters: map[string]*counters{}}
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
	t := &table{seq: m.Seq, backends: make([]backend, len(m.Workers))}
	weights := make([]float64, len(m.Workers))
	b.mu.Lock()
	for i, w := range m.Workers {
		c := b.counters[w.ID]
		if c == nil {
			c = &counters{}
			b.counters[w.ID] = c
		}
		t.backends[i] = backend{Worker: w, c: c}
		weights[i] = w.Weight
	}
	b.mu.Unlock()
	p, err := newPicker(b.algo, weights, func(i int) int64 { return t.backends[i].c.active.Load() })
	if err != nil {
		return err
	}
	t.picker = p
	b.table.Store(t)
	return nil
}

// Workers returns the current table's workers.
func (b *Balancer) Workers() []weightfeed.Worker {
	t := b.table.Load()
	if t == nil {
		return nil
	}
	out := make([]weightfeed.Worker, len(t.backends))
	for i, be := range t.backends {
		out[i] = be.Worker
	}
	return out
}

// Report is what the balancer has seen per worker, for the agent.
func (b *Balancer) Report(name string) weightfeed.Report {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := weightfeed.Report{Type: weightfeed.TypeReport, Balancer: name}
	for id, c := range b.counters {
		r.Workers = append(r.Workers, weightfeed.WorkerReport{
			ID: id, Active: c.active.Load(), Requests: c.requests.Load(), Failures: c.failures.Load(),
		})
	}
	slices.SortFunc(r.Workers, func(x, y weightfeed.WorkerReport) int { return strings.Compare(x.ID, y.ID) })
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

func idempotent(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return r.Body == nil || r.Body == http.NoBody || r.GetBody != nil
	}
	return r.Header.Get("Idempotency-Key") != "" && (r.Body == nil || r.Body == http.NoBody || r.GetBody != nil)
}

func (p *pickingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t := p.b.table.Load()
	if t == nil {
		return nil, errNoWorker
	}
	attempts := 1
	if idempotent(r) {
		attempts += p.b.retries
	}
	var tried []int
	var lastErr error
	for range attempts {
		i := t.picker.Pick(rand.Uint64())
		if slices.Contains(tried, i) {
			i = t.fallback(tried)
		}
		if i < 0 {
			break
		}
		tried = append(tried, i)
		be := t.backends[i]
		out := r
		if len(tried) > 1 {
			out = r.Clone(r.Context())
			if r.GetBody != nil {
				body, err := r.GetBody()
				if err != nil {
					return nil, err
				}
				out.Body = body
			}
		}
		out.URL.Host, out.Host = be.Addr, ""
		be.c.requests.Add(1)
		be.c.active.Add(1)
		resp, err := p.next.RoundTrip(out)
		if err == nil {
			resp.Body = &doneBody{ReadCloser: resp.Body, c: be.c}
			return resp, nil
		}
		be.c.active.Add(-1)
		be.c.failures.Add(1)
		lastErr = fmt.Errorf("worker %s (%s): %w", be.ID, be.Addr, err)
		if r.Context().Err() != nil {
			break
		}
		p.b.log.Debug("worker failed", "worker", be.ID, "err", err)
	}
	if lastErr == nil {
		return nil, errNoWorker
	}
	return nil, lastErr
}

// fallback is the first live backend not yet tried, so a retry never
// returns to the worker that just failed.
func (t *table) fallback(tried []int) int {
	for i, be := range t.backends {
		if be.Weight > 0 && !slices.Contains(tried, i) {
			return i
		}
	}
	return -1
}

type doneBody struct {
	io.ReadCloser
	c    *counters
	once sync.Once
}

func (d *doneBody) Close() error {
	d.once.Do(func() { d.c.active.Add(-1) })
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
