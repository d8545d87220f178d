// Package worker is the demo worker of seed 004's stack: an HTTP service
// whose /work endpoint burns a requested amount of CPU, so that scores,
// weights and utilisation respond to load the way a real service would.
package worker

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ringside/ringside/internal/loadreport"
)

// MaxCost bounds one request's work (hash rounds), so a bad request cannot
// occupy a worker for minutes.
const MaxCost = 10_000_000

// Options configure a worker.
type Options struct {
	Name string
	// CPULimit > 0 makes the worker throttle itself to that many CPUs with
	// a duty cycle (for the process runtime, which has no cgroup limit);
	// under Docker the engine enforces NanoCPUs and this stays 0.
	CPULimit float64
	// DefaultCost is the work of a request without ?cost= (hash rounds).
	DefaultCost int
}

// Handler serves /work, /load (its load report as JSON, for probes),
// /healthz and /metrics; every /work response carries the load report in
// the Endpoint-Load-Metrics header.
type Handler struct {
	o        Options
	mux      *http.ServeMux
	slots    chan struct{}
	duty     float64 // fraction of each slot's time spent computing
	active   atomic.Int64
	meter    *loadreport.Meter
	requests prometheus.Counter
	abandons prometheus.Counter
	latency  prometheus.Histogram
}

// New builds the handler.
func New(o Options) (*Handler, error) {
	if o.Name == "" {
		o.Name, _ = os.Hostname()
	}
	if o.DefaultCost == 0 {
		o.DefaultCost = 20_000
	}
	if math.IsNaN(o.CPULimit) || o.CPULimit < 0 || o.CPULimit > 64 {
		return nil, fmt.Errorf("cpu limit %v: want 0 (none) or a number in (0, 64]", o.CPULimit)
	}
	h := &Handler{o: o, mux: http.NewServeMux(), duty: 1, meter: loadreport.NewMeter(nil)}
	if o.CPULimit > 0 {
		n := int(math.Ceil(o.CPULimit))
		h.slots = make(chan struct{}, n)
		h.duty = o.CPULimit / float64(n)
		h.meter = loadreport.NewMeter(func() float64 { return o.CPULimit })
	}
	reg := prometheus.NewRegistry()
	h.requests = prometheus.NewCounter(prometheus.CounterOpts{Name: "worker_requests_total", Help: "Work requests served."})
	h.abandons = prometheus.NewCounter(prometheus.CounterOpts{Name: "worker_abandoned_total", Help: "Work requests stopped because their client went away."})
	h.latency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "worker_request_seconds", Help: "Work request duration.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)})
	reg.MustRegister(h.requests, h.abandons, h.latency, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "worker_active_requests",
		Help: "Requests in flight."}, func() float64 { return float64(h.active.Load()) }))
	h.mux.HandleFunc("/work", h.work)
	h.mux.HandleFunc("/load", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(h.meter.Report(time.Now()))
	})
	h.mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	h.mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *Handler) work(w http.ResponseWriter, r *http.Request) {
	cost := h.o.DefaultCost
	if s := r.URL.Query().Get("cost"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 || v > MaxCost {
			http.Error(w, fmt.Sprintf("cost %q: want an integer in [0, %d]", s, MaxCost), http.StatusBadRequest)
			return
		}
		cost = v
	}
	h.active.Add(1)
	defer h.active.Add(-1)
	rif := h.meter.Begin()
	start := time.Now()
	sum, err := h.burn(r.Context(), cost)
	end := time.Now()
	h.meter.End(end, end.Sub(start), err != nil, rif)
	if err != nil {
		// The client went away: nobody reads the answer.
		h.abandons.Inc()
		return
	}
	h.requests.Inc()
	h.latency.Observe(end.Sub(start).Seconds())
	w.Header().Set("X-Worker", h.o.Name)
	w.Header().Set(loadreport.Header, h.meter.Report(end).HeaderValue())
	fmt.Fprintf(w, "%s %d %x\n", h.o.Name, cost, sum[:4])
}

// burn hashes cost times. With a CPU limit it holds one of ceil(limit)
// slots and then idles so that each slot computes only limit/ceil(limit)
// of the time: the process as a whole uses at most limit CPUs. It stops
// when ctx ends — a client that went away stops costing CPU.
func (h *Handler) burn(ctx context.Context, cost int) ([32]byte, error) {
	var buf [32]byte
	if h.slots != nil {
		select {
		case h.slots <- struct{}{}:
		case <-ctx.Done():
			return buf, ctx.Err()
		}
		defer func() { <-h.slots }()
	}
	t := time.Now()
	for i := range cost {
		if i%4096 == 0 && ctx.Err() != nil {
			return buf, ctx.Err()
		}
		binary.LittleEndian.PutUint64(buf[:8], uint64(i))
		buf = sha256.Sum256(buf[:])
	}
	if h.duty < 1 {
		idle := time.NewTimer(time.Duration(float64(time.Since(t)) * (1/h.duty - 1)))
		defer idle.Stop()
		select {
		case <-idle.C:
		case <-ctx.Done():
			return buf, ctx.Err()
		}
	}
	return buf, nil
}
