package kubeexp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/internal/cgroup"
)

// The load side of the throughput experiments: closed-loop clients and
// the nodes' CPU over a load point.

// tpClient is what a load client does per request.
type tpClient func(ctx context.Context, rng *rand.Rand) error

// tpKeys is the key space the load touches (a write overwrites).
const tpKeys = 1000

var tpValue = strings.Repeat("v", 64)

func doRequest(ctx context.Context, hc *http.Client, method, base string, rng *rand.Rand) error {
	var body io.Reader
	if method == http.MethodPut {
		body = strings.NewReader(tpValue)
	}
	req, err := http.NewRequestWithContext(ctx, method, fmt.Sprintf("%s/kv/k%d", base, rng.IntN(tpKeys)), body)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotFound {
		// The replica's own words say which of its refusals this was (no
		// leader, a stale sidecar, a follower that refused the apply).
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s %s: %s: %s", method, base, resp.Status, bytes.TrimSpace(b))
	}
	io.Copy(io.Discard, resp.Body)
	return nil
}

// tpResult is one load point.
type tpResult struct {
	requests, errors int
	dur              time.Duration
	lat              []float64 // ms, of the requests that succeeded
	firstErr         error
}

// cpuSample is one node's CPU over one sampling period.
type cpuSample struct {
	t    time.Duration
	node string
	pct  float64
}

// tpColumns are the columns of a load point, shared by the throughput
// experiments' rows.
type tpColumns struct {
	Requests   int     `csv:"requests"`
	Errors     int     `csv:"errors"`
	DurationS  float64 `csv:"duration_s"`
	Throughput float64 `csv:"throughput_rps"`
	P50        float64 `csv:"p50_ms"`
	P99        float64 `csv:"p99_ms"`
}

func (r tpResult) columns() tpColumns {
	s := experiments.Summarize(r.lat)
	return tpColumns{Requests: r.requests, Errors: r.errors, DurationS: r.dur.Seconds(),
		Throughput: float64(r.requests-r.errors) / r.dur.Seconds(), P50: s.P50, P99: s.P99}
}

// drive runs clients closed-loop clients for d and measures them. A
// client starts requests until d has passed and finishes the one it is
// in (none is cut off), so every client completes at least one request
// however slow the machine — a point of 0 requests measures nothing — and
// the point's duration runs to its last answer.
func drive(ctx context.Context, clients int, d time.Duration, seed uint64, newClient func() tpClient) tpResult {
	var mu sync.Mutex
	res := tpResult{}
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range clients {
		do := newClient()
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Go(func() {
			var lat []float64
			var n, errs int
			for ctx.Err() == nil && (n == 0 || time.Since(t0) < d) {
				s := time.Now()
				err := do(ctx, rng)
				if ctx.Err() != nil {
					break // the run was cancelled
				}
				n++
				if err != nil {
					errs++
					mu.Lock()
					if res.firstErr == nil {
						res.firstErr = err
					}
					mu.Unlock()
					continue
				}
				lat = append(lat, experiments.Ms(time.Since(s)))
			}
			mu.Lock()
			res.requests += n
			res.errors += errs
			res.lat = append(res.lat, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.dur = time.Since(t0)
	return res
}

// newHTTPClient keeps enough idle connections for the largest client count.
func newHTTPClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64}}
}

// cpuSampler records every node's CPU use, as a share of its limit, every
// interval until stopped.
type cpuSampler struct {
	stop chan struct{}
	done chan struct{}
	rows []cpuSample
}

func sampleCPU(nodes map[string]*cgroup.Group, limit float64, every time.Duration) *cpuSampler {
	s := &cpuSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		names := make([]string, 0, len(nodes))
		for n := range nodes {
			names = append(names, n)
		}
		slices.Sort(names)
		prev := map[string]time.Duration{}
		for _, n := range names {
			prev[n], _ = nodes[n].Usage()
		}
		t0, last := time.Now(), time.Now()
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(every):
			}
			now := time.Now()
			for _, n := range names {
				u, err := nodes[n].Usage()
				if err != nil {
					continue
				}
				pct := 100 * (u - prev[n]).Seconds() / now.Sub(last).Seconds() / limit
				s.rows = append(s.rows, cpuSample{now.Sub(t0), n, pct})
				prev[n] = u
			}
			last = now
		}
	}()
	return s
}

func (s *cpuSampler) finish() []cpuSample {
	close(s.stop)
	<-s.done
	return s.rows
}
