package agent_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/agent"
	"github.com/ringside/ringside/agent/lifecycle"
	"github.com/ringside/ringside/agent/runtime"
	"github.com/ringside/ringside/agent/runtime/dockertest"
	"github.com/ringside/ringside/balancer"
	"github.com/ringside/ringside/internal/redistest"
)

// load sends GETs from n clients until stop is closed, counting outcomes.
type load struct {
	ok, failed atomic.Int64
	wg         sync.WaitGroup
	stop       chan struct{}
}

func startLoad(url string, n int) *load {
	l := &load{stop: make(chan struct{})}
	c := &http.Client{Timeout: 10 * time.Second}
	for range n {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				resp, err := c.Get(url)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err == nil && resp.StatusCode == http.StatusOK {
					l.ok.Add(1)
				} else {
					l.failed.Add(1)
				}
			}
		}()
	}
	return l
}

func (l *load) end() { close(l.stop); l.wg.Wait() }

// served waits until n more requests have been answered.
func (l *load) served(t *testing.T, n int64, what string) {
	t.Helper()
	want := l.ok.Load() + n
	require.Eventually(t, func() bool { return l.ok.Load() >= want }, 20*time.Second, 10*time.Millisecond, what)
}

// A worker container is SIGKILLed under load: the balancer retries the
// idempotent requests that hit it on another worker, counts its failures,
// and the agent notices the loss and refills the pool to its minimum.
func TestDockerWorkerKilledUnderLoad(t *testing.T) {
	d := dockertest.Pool(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var victims []runtime.Instance
	for range 2 {
		in, err := d.Start(ctx, runtime.Spec{CPULimit: 0.5, Default: true})
		require.NoError(t, err)
		victims = append(victims, in)
	}
	a, err := agent.New(agent.Config{Runtime: d, Pool: lifecycle.Config{Min: 2, Max: 3}, Spawn: runtime.Spec{CPULimit: 0.5},
		Interval: 300 * time.Millisecond, Token: token, Log: quiet})
	require.NoError(t, err)
	srv := httptest.NewServer(a.Handler(prometheus.NewRegistry()))
	defer srv.Close()
	go a.Run(ctx)
	b, err := balancer.New(balancer.Options{Log: quiet})
	require.NoError(t, err)
	go b.Follow(ctx, balancer.FeedOptions{URL: wsURL(srv) + "/feed", Token: token, Name: "lb", TallyEvery: 100 * time.Millisecond, AllowLoopback: true})
	lb := httptest.NewServer(b)
	defer lb.Close()
	require.Eventually(t, func() bool { return len(b.Workers()) == 2 }, 10*time.Second, 20*time.Millisecond)

	l := startLoad(lb.URL+"/work?cost=2000", 8)
	l.served(t, 50, "the load runs before the kill")
	_, err = d.Client().ContainerKill(ctx, victims[0].ID, client.ContainerKillOptions{Signal: "KILL"})
	require.NoError(t, err)
	// The agent replaces it: two workers serve again, one of them new.
	// The balancer forgets the dead worker once it leaves the table, so its
	// failures are read while it is still there.
	var deadFailures uint64
	require.Eventually(t, func() bool {
		for _, w := range b.Tally("").Workers {
			if w.ID == victims[0].ID {
				deadFailures = max(deadFailures, w.Failures)
			}
		}
		ws := b.Workers()
		return len(ws) == 2 && ws[0].ID != victims[0].ID && ws[1].ID != victims[0].ID
	}, 20*time.Second, 50*time.Millisecond)
	l.served(t, 50, "the refilled pool serves")
	l.end()

	assert.Zero(t, l.failed.Load(), "every GET was answered: the ones that hit the dead worker were retried")
	assert.Greater(t, l.ok.Load(), int64(100))
	assert.Positive(t, deadFailures, "attempts at the killed worker are counted")
	kinds := map[string]bool{}
	for _, e := range a.View().Events {
		kinds[e.Kind] = true
	}
	assert.True(t, kinds["lost"], "the agent saw the worker go")
	assert.True(t, kinds[lifecycle.Refill], "and refilled the pool")
}

// The agent dies while the balancer serves: the balancer keeps its last
// table and serves on; a new agent resumes from Redis and the balancer
// reconnects to it.
func TestAgentKilledWhileBalancerServes(t *testing.T) {
	rs := redistest.Start(t)
	store := agent.NewRedisStore(rs.Client(), "k")
	rt := runtime.NewProcess(workerBin(t))
	t.Cleanup(func() { rt.RemoveAll(context.Background()) })
	ctx := context.Background()
	for _, name := range []string{"p", "q"} {
		_, err := rt.Start(ctx, runtime.Spec{Name: name, CPULimit: 1, Default: true})
		require.NoError(t, err)
	}
	newAgent := func() (*agent.Agent, *httptest.Server) {
		a, err := agent.New(agent.Config{Runtime: rt, Store: store, Pool: lifecycle.Config{Min: 2}, Interval: 100 * time.Millisecond, Token: token, Log: quiet})
		require.NoError(t, err)
		require.NoError(t, a.Resume(ctx))
		return a, httptest.NewUnstartedServer(a.Handler(prometheus.NewRegistry()))
	}
	a1, srv := newAgent()
	actx, stop1 := context.WithCancel(ctx)
	go a1.Run(actx)
	srv.Start()
	addr := srv.Listener.Addr().String()
	b, err := balancer.New(balancer.Options{Log: quiet})
	require.NoError(t, err)
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	go b.Follow(bctx, balancer.FeedOptions{URL: wsURL(srv) + "/feed", Token: token, Name: "lb", TallyEvery: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, AllowLoopback: true})
	lb := httptest.NewServer(b)
	defer lb.Close()
	require.Eventually(t, func() bool { return len(b.Workers()) == 2 }, 10*time.Second, 20*time.Millisecond)

	l := startLoad(lb.URL+"/work?cost=1000", 4)
	l.served(t, 20, "the load runs before the agent dies")
	require.Eventually(t, func() bool { return b.Seq() > 2 }, 10*time.Second, 20*time.Millisecond, "a few queues before the agent dies")
	stop1()
	srv.CloseClientConnections()
	srv.Close()
	l.served(t, 100, "requests are served while the agent is away")
	assert.Len(t, b.Workers(), 2, "the last table stays")

	// A new agent on the same address resumes from Redis. It is stepped by
	// hand, so its queue numbers stay far below the old agent's.
	seqBefore := b.Seq()
	a2, srv2 := newAgent()
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	require.NoError(t, err)
	srv2.Listener = ln
	srv2.Start()
	defer srv2.Close()
	require.NoError(t, a2.Step(ctx)) // queue 1
	require.Eventually(t, func() bool { return b.Seq() == 1 }, 10*time.Second, 20*time.Millisecond,
		"the balancer reconnected and took the new agent's queue 1, not ignoring it as older than %d", seqBefore)
	require.NoError(t, a2.Step(ctx))
	assert.Equal(t, 1, a2.View().Balancers, "the new agent sees the balancer")
	l.end()
	assert.Zero(t, l.failed.Load())
}
