package balancer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/ringside/ringside/internal/loadreport"
)

// One request's attempts, shared by the ServeHTTP path (pickingTransport)
// and the Front: pick a worker never tried before, count it in flight,
// send, and on a failure to answer try another while attempts are left.

// try runs up to attempts sends; send gets the worker, the request's start
// and whether this is a retry, and returns nil once an answer is on its
// way back (the send then ends the request itself, with done). A failure
// is counted against the worker and the next one is tried, unless send
// wrapped it with stop. try returns nil, the last failure, or errNoWorker
// when no worker could be tried at all.
func (b *Balancer) try(t *table, attempts int, send func(i int, up upstream, start time.Duration, retry bool) error) error {
	var tried []int
	var lastErr error
	for range attempts {
		i := b.choose(t, tried)
		if i < 0 {
			break
		}
		tried = append(tried, i)
		up := t.upstreams[i]
		start := b.begin(up)
		err := send(i, up, start, len(tried) > 1)
		if err == nil {
			return nil
		}
		b.done(t, i, start, true)
		var s stopErr
		if errors.As(err, &s) {
			return s.err
		}
		lastErr = fmt.Errorf("worker %s (%s): %w", up.ID, up.Addr, err)
		b.log.Debug("worker failed", "worker", up.ID, "err", err)
	}
	if lastErr == nil {
		return errNoWorker
	}
	return lastErr
}

// stopErr ends try's attempts at once (the client went away, the request
// cannot be replayed).
type stopErr struct{ err error }

func (s stopErr) Error() string { return s.err.Error() }

func stop(err error) error { return stopErr{err} }

func idempotent(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return r.Body == nil || r.Body == http.NoBody || r.GetBody != nil
	}
	return r.Header.Get("Idempotency-Key") != "" && (r.Body == nil || r.Body == http.NoBody || r.GetBody != nil)
}

// choose picks the upstream of one attempt, never one already tried, and
// sends the probes the picker asks for; −1 when none is left.
func (b *Balancer) choose(t *table, tried []int) int {
	i := t.picker.Pick(rand.Uint64())
	if slices.Contains(tried, i) {
		i = t.fallback(tried)
	}
	if i >= 0 && t.prober != nil {
		b.probe(t, t.prober)
	}
	return i
}

// begin counts a request sent to up and returns its start time.
func (b *Balancer) begin(up upstream) time.Duration {
	up.c.requests.Add(1)
	up.c.Active.Add(1)
	return b.now()
}

// answered takes what a response's headers tell the picker.
func (b *Balancer) answered(t *table, i int, h http.Header) {
	if t.readsLoadReports {
		b.reported(t.upstreams[i], h.Get(loadreport.Header))
	}
}

// done ends a request to upstream i: one fewer in flight, its latency (or
// failure) observed.
func (b *Balancer) done(t *table, i int, start time.Duration, failed bool) {
	c := t.upstreams[i].c
	c.Active.Add(-1)
	if failed {
		c.failures.Add(1)
	}
	if t.observer != nil {
		t.observer.Observe(i, b.now()-start, failed)
	}
}

// now is the pickers' clock.
func (b *Balancer) now() time.Duration { return time.Since(b.start) }

// fallback is the first live upstream not yet tried, so a retry never
// returns to the worker that just failed.
func (t *table) fallback(tried []int) int {
	for i, up := range t.upstreams {
		if up.Weight > 0 && !slices.Contains(tried, i) {
			return i
		}
	}
	return -1
}
