package balancer

import (
	"context"
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

	"github.com/ringside/ringside/internal/loadreport"
	"github.com/ringside/ringside/internal/weightfeed"
)

// Balancer is the weighted reverse proxy of seed 004: each request goes to
// a worker chosen by the picker over the current table. The table is
// immutable and swapped atomically when a weight feed message arrives, so
// picks never take a lock (except smooth-wrr's own).
type Balancer struct {
	algo        string
	tuning      Tuning
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

type backend struct {
	weightfeed.Worker
	c *counters
}

type table struct {
	seq      uint64
	backends []backend
	picker   Picker
}

// counters are a worker's, kept by ID across table swaps: what the
// pickers learned (Load) and what the agent is told.
type counters struct {
	Load
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
	Tuning    Tuning // the latency- and load-aware pickers' parameters
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
	if _, err := NewPicker(o.Algorithm, nil, Inputs{Tuning: o.Tuning}); err != nil {
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
	t := &table{seq: m.Seq, backends: make([]backend, len(m.Workers))}
	weights := make([]float64, len(m.Workers))
	b.mu.Lock()
	in := make(map[string]bool, len(m.Workers))
	for i, w := range m.Workers {
		c := b.counters[w.ID]
		if c == nil {
			c = &counters{}
			b.counters[w.ID] = c
		}
		t.backends[i] = backend{Worker: w, c: c}
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
	loads := make([]*Load, len(t.backends))
	for i, be := range t.backends {
		loads[i] = &be.c.Load
	}
	p, err := newPicker(b.algo, weights, Inputs{Loads: loads, Now: b.now, Tuning: b.tuning})
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
			ID: id, Active: c.Active.Load(), Requests: c.requests.Load(), Failures: c.failures.Load(),
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
	b := p.b
	t := b.table.Load()
	if t == nil {
		return nil, errNoWorker
	}
	attempts := 1
	if idempotent(r) {
		attempts += b.retries
	}
	var tried []int
	var lastErr error
	for range attempts {
		i := b.choose(t, tried)
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
		start := b.begin(be)
		resp, err := p.next.RoundTrip(out)
		if err == nil {
			b.answered(t, i, resp.Header)
			resp.Body = &doneBody{ReadCloser: resp.Body, t: t, i: i, start: start, b: b}
			return resp, nil
		}
		b.done(t, i, start, true)
		lastErr = fmt.Errorf("worker %s (%s): %w", be.ID, be.Addr, err)
		if r.Context().Err() != nil {
			break
		}
		b.log.Debug("worker failed", "worker", be.ID, "err", err)
	}
	if lastErr == nil {
		return nil, errNoWorker
	}
	return nil, lastErr
}

// choose picks the backend of one attempt, never one already tried, and
// sends the probes the picker asks for; −1 when none is left.
func (b *Balancer) choose(t *table, tried []int) int {
	i := t.picker.Pick(rand.Uint64())
	if slices.Contains(tried, i) {
		i = t.fallback(tried)
	}
	if i >= 0 {
		if pr, ok := t.picker.(Prober); ok {
			b.probe(t, pr)
		}
	}
	return i
}

// begin counts a request sent to be and returns its start time.
func (b *Balancer) begin(be backend) time.Duration {
	be.c.requests.Add(1)
	be.c.Active.Add(1)
	return b.now()
}

// answered takes what a response's headers tell the picker.
func (b *Balancer) answered(t *table, i int, h http.Header) {
	if _, ok := t.picker.(*reportWRR); ok {
		b.reported(t.backends[i], h.Get(loadreport.Header))
	}
}

// done ends a request to backend i: one fewer in flight, its latency (or
// failure) observed.
func (b *Balancer) done(t *table, i int, start time.Duration, failed bool) {
	c := t.backends[i].c
	c.Active.Add(-1)
	if failed {
		c.failures.Add(1)
	}
	if o, ok := t.picker.(Observer); ok {
		o.Observe(i, b.now()-start, failed)
	}
}

// now is the pickers' clock.
func (b *Balancer) now() time.Duration { return time.Since(b.start) }

// reported feeds a response's load report to the worker's Load; a
// malformed one is logged and changes nothing.
func (b *Balancer) reported(be backend, header string) {
	if header == "" {
		return
	}
	r, err := loadreport.ParseHeader(header)
	if err != nil {
		b.log.Debug("load report refused", "worker", be.ID, "err", err)
		return
	}
	be.c.Reported(b.now(), Report{QPS: r.QPS, EPS: r.EPS, Utilization: r.Utilization}, b.tuning.ErrorPenalty, b.tuning.Expiry)
}

// maxProbes bounds the probes in flight; past it a probe is skipped
// (prequal then has fewer, older probes, never a stalled request).
const maxProbes = 64

// probe sends the probes the picker asks for, asynchronously: GET /load on
// each backend, the answer reported back with Probed.
func (b *Balancer) probe(t *table, pr Prober) {
	var buf [16]int
	for _, i := range pr.TakeProbes(buf[:0], rand.Uint64()) {
		select {
		case b.probes <- struct{}{}:
		default:
			continue
		}
		go func() {
			defer func() { <-b.probes }()
			r, err := b.getLoad(t.backends[i].Addr)
			if err != nil {
				b.log.Debug("probe failed", "worker", t.backends[i].ID, "err", err)
				return
			}
			pr.Probed(i, r.RIF, r.Latency())
		}()
	}
}

func (b *Balancer) getLoad(addr string) (loadreport.Report, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/load", nil)
	if err != nil {
		return loadreport.Report{}, err
	}
	resp, err := b.probeClient.Do(req)
	if err != nil {
		return loadreport.Report{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return loadreport.Report{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return loadreport.Report{}, fmt.Errorf("probe %s: %s", addr, resp.Status)
	}
	return loadreport.Decode(body)
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
