package agent_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/agent"
	"github.com/ringside/ringside/agent/lifecycle"
	"github.com/ringside/ringside/agent/runtime"
	"github.com/ringside/ringside/balancer"
	"github.com/ringside/ringside/internal/imagebuild"
	"github.com/ringside/ringside/internal/redistest"
	"github.com/ringside/ringside/internal/weightfeed"
)

const token = "test-token"

var quiet = slog.New(slog.DiscardHandler)

func workerBin(t *testing.T) string {
	t.Helper()
	bin, err := imagebuild.Static(context.Background(), "github.com/ringside/ringside/cmd/worker")
	require.NoError(t, err)
	return bin
}

type stack struct {
	rt  *runtime.Process
	a   *agent.Agent
	srv *httptest.Server
	b   *balancer.Balancer
	lb  *httptest.Server
}

// newStack starts process workers, an agent (stepped by the test unless
// run is set) behind an HTTP server, and a balancer following its feed.
func newStack(t *testing.T, specs []runtime.Spec, pc lifecycle.Config, store agent.Store, run bool) *stack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &stack{rt: runtime.NewProcess(workerBin(t))}
	t.Cleanup(func() { s.rt.RemoveAll(context.Background()) })
	for _, sp := range specs {
		_, err := s.rt.Start(ctx, sp)
		require.NoError(t, err)
	}
	a, err := agent.New(agent.Config{Runtime: s.rt, Store: store, Pool: pc, Spawn: runtime.Spec{CPULimit: 0.5},
		Interval: 200 * time.Millisecond, Token: token, Log: quiet})
	require.NoError(t, err)
	s.a = a
	require.NoError(t, a.Resume(ctx))
	s.srv = httptest.NewServer(a.Handler(prometheus.NewRegistry()))
	t.Cleanup(s.srv.Close)
	if run {
		go a.Run(ctx)
	} else {
		require.NoError(t, a.Step(ctx))
	}
	s.b, err = balancer.New(balancer.Options{Log: quiet})
	require.NoError(t, err)
	go s.b.Follow(ctx, balancer.FeedOptions{URL: wsURL(s.srv) + "/feed", Token: token, Name: "lb1", TallyEvery: 100 * time.Millisecond, AllowLoopback: true})
	s.lb = httptest.NewServer(s.b)
	t.Cleanup(s.lb.Close)
	require.Eventually(t, func() bool { return len(s.b.Workers()) == len(specs) }, 10*time.Second, 20*time.Millisecond)
	return s
}

func wsURL(s *httptest.Server) string { return "ws" + strings.TrimPrefix(s.URL, "http") }

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestFeedDrivesBalancerAndReportsComeBack(t *testing.T) {
	s := newStack(t, []runtime.Spec{{Name: "w1", CPULimit: 1, Default: true}, {Name: "w2", CPULimit: 1, Default: true}}, lifecycle.Config{Min: 2}, nil, false)
	seen := map[string]int{}
	for range 100 {
		code, body := get(t, s.lb.URL+"/work?cost=100")
		require.Equal(t, http.StatusOK, code, body)
		seen[strings.Fields(body)[0]]++
	}
	assert.Len(t, seen, 2, "both workers served: %v", seen)
	// The balancer's report reaches the agent: its next step shows the counts.
	require.Eventually(t, func() bool {
		require.NoError(t, s.a.Step(context.Background()))
		total := uint64(0)
		for _, w := range s.a.View().Workers {
			total += w.Requests
		}
		return total == 100
	}, 5*time.Second, 50*time.Millisecond)
	v := s.a.View()
	assert.Equal(t, 1, v.Balancers)
	for _, w := range v.Workers {
		assert.Greater(t, w.Weight, 0.0)
		assert.InDelta(t, w.Score, w.Weight, 1e-9, "weight = score")
	}
}

func TestSundownDrainsThenShutsDownButNeverADefault(t *testing.T) {
	pc := lifecycle.Config{Min: 1, SundownAfter: 300 * time.Millisecond, DrainGrace: 200 * time.Millisecond}
	s := newStack(t, []runtime.Spec{{Name: "keep", CPULimit: 1, Default: true}, {Name: "extra", CPULimit: 0.5}}, pc, nil, true)
	// The worker is gone from the runtime as soon as its process exits;
	// the agent records the shutdown when Stop returns, a moment later.
	var kinds []string
	require.Eventually(t, func() bool {
		insts, _ := s.rt.List(context.Background())
		kinds = kinds[:0]
		for _, e := range s.a.View().Events {
			kinds = append(kinds, e.Kind)
		}
		return len(insts) == 1 && insts[0].Name == "keep" && slices.Contains(kinds, "shutdown")
	}, 15*time.Second, 50*time.Millisecond, "the idle non-default worker is shut down: events %v", kinds)
	for i, e := range s.a.View().Events {
		assert.Equal(t, uint64(i+1), e.Seq, "events are numbered in order, even within one step")
	}
	assert.Subset(t, kinds, []string{"sundown", "shutdown"})
	// The balancer has stopped sending to it before it went: no failure.
	for _, w := range s.b.Tally("x").Workers {
		assert.Zero(t, w.Failures, "worker %s", w.ID)
	}
	// Five more steps (1 s) outlast sundown and drain (0.5 s).
	seq := s.a.View().Seq
	require.Eventually(t, func() bool { return s.a.View().Seq >= seq+5 }, 10*time.Second, 20*time.Millisecond, "the agent keeps stepping")
	insts, _ := s.rt.List(context.Background())
	assert.Len(t, insts, 1, "the default worker stays")
}

func TestScaleUpUnderLoad(t *testing.T) {
	// Everything counts as High from 20 % utilisation, so a loaded
	// half-CPU worker triggers scale-up quickly.
	pc := lifecycle.Config{Low: 5, High: 20, Hysteresis: 2, Min: 1, Max: 2, ScaleUpAfter: 400 * time.Millisecond, SundownAfter: time.Hour}
	s := newStack(t, []runtime.Spec{{Name: "only", CPULimit: 0.5, Default: true}}, pc, nil, true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if len(s.b.Workers()) >= 2 {
					return
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.lb.URL+"/work?cost=50000", nil)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, ctx.Err(), "no scale-up within 20 s")
	insts, _ := s.rt.List(context.Background())
	assert.Len(t, insts, 2)
	found := false
	for _, e := range s.a.View().Events {
		found = found || e.Kind == lifecycle.ScaleUp
	}
	assert.True(t, found, "a scale-up event is recorded")
}

func TestResumeFromRedisAndSurviveRedisRestart(t *testing.T) {
	rs := redistest.Start(t)
	store := agent.NewRedisStore(rs.Client(), "t")
	// Every utilisation below 100 % is Medium, the state a worker starts
	// in: a worker seen at its start-up's CPU by the first step and idle by
	// the next moved from Medium to Low between them under the defaults,
	// and a new state has a new start.
	pc := lifecycle.Config{Low: 1e-9, High: 100, Min: 1, SundownAfter: time.Hour}
	s := newStack(t, []runtime.Spec{{Name: "a", CPULimit: 1, Default: true}, {Name: "b", CPULimit: 1}}, pc, store, false)
	ctx := context.Background()
	require.NoError(t, s.a.Step(ctx))
	snap, ok, err := store.Load(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 2, snap.Desired)
	require.Len(t, snap.Workers, 2)
	before := map[string]agent.WorkerState{}
	for _, w := range snap.Workers {
		before[w.ID] = w
		assert.NotEmpty(t, w.Times, "availability window persisted")
	}

	// A new agent (the old one "crashed") resumes: same lifecycle records,
	// and the time already spent in a state is kept.
	a2, err := agent.New(agent.Config{Runtime: s.rt, Store: store, Pool: pc, Token: token, Log: quiet})
	require.NoError(t, err)
	require.NoError(t, a2.Resume(ctx))
	require.NoError(t, a2.Step(ctx))
	kept := 0
	for _, w := range a2.View().Workers {
		if w.State == before[w.ID].State {
			kept++
			assert.Equal(t, before[w.ID].Since, w.Since, "worker %s keeps its state's start", w.Name)
		}
		assert.GreaterOrEqual(t, len(w.Times), len(before[w.ID].Times))
	}
	assert.Positive(t, kept, "some worker stayed in its state across the resume")

	// Redis goes away: steps report it but the agent keeps serving the feed.
	rs.Stop()
	seq := a2.View().Seq
	assert.ErrorContains(t, a2.Step(ctx), "save state to redis")
	assert.Greater(t, a2.View().Seq, seq, "the queue is still published")
	rs.Restart() // empty: no persistence
	require.NoError(t, a2.Step(ctx))
	snap, ok, err = store.Load(ctx)
	require.NoError(t, err)
	assert.True(t, ok, "state written again after the restart")
	assert.Len(t, snap.Workers, 2)
}

func TestCorruptStoreIsNamed(t *testing.T) {
	rs := redistest.Start(t)
	rdb := rs.Client()
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, "t:desired", "2", 0).Err())
	require.NoError(t, rdb.HSet(ctx, "t:workers", "w1", "{not json").Err())
	_, _, err := agent.NewRedisStore(rdb, "t").Load(ctx)
	assert.ErrorContains(t, err, `redis t:workers["w1"]`)

	// Well-formed JSON that no agent wrote is refused the same way.
	for desired, w := range map[string]string{
		"9223372036854775807": `{"id":"w1","state":"low"}`,
		"2":                   `{"id":"another","state":"low"}`,
		"1":                   `{"id":"w1","state":"on fire"}`,
		"0":                   `{"id":"w1","state":"low","weight":-1}`,
	} {
		require.NoError(t, rdb.Set(ctx, "t:desired", desired, 0).Err())
		require.NoError(t, rdb.HSet(ctx, "t:workers", "w1", w).Err())
		_, ok, err := agent.NewRedisStore(rdb, "t").Load(ctx)
		assert.False(t, ok)
		assert.ErrorContains(t, err, "redis t:", w)
	}
}

func TestFeedRequiresTokenAndOrigin(t *testing.T) {
	var got []weightfeed.Tally
	var mu sync.Mutex
	f := agent.NewFeed(token, []string{"http://allowed.example"}, func(r weightfeed.Tally) error { mu.Lock(); got = append(got, r); mu.Unlock(); return nil }, quiet)
	srv := httptest.NewServer(f)
	defer srv.Close()
	dial := func(h http.Header) (*websocket.Conn, int, error) {
		c, resp, err := websocket.DefaultDialer.Dial(wsURL(srv), h)
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		return c, code, err
	}
	_, code, err := dial(nil)
	require.Error(t, err)
	assert.Equal(t, http.StatusUnauthorized, code, "no token")
	_, code, _ = dial(http.Header{"Authorization": {"Bearer wrong"}})
	assert.Equal(t, http.StatusUnauthorized, code, "wrong token")
	_, code, _ = dial(http.Header{"Authorization": {token}})
	assert.Equal(t, http.StatusUnauthorized, code, "the token without its scheme")
	// In the URL it would land in access logs: refused there.
	qc, resp, err := websocket.DefaultDialer.Dial(wsURL(srv)+"?token="+token, nil)
	require.Error(t, err)
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a token in the query")
	if qc != nil {
		qc.Close()
	}
	_, code, _ = dial(http.Header{"Authorization": {"Bearer " + token}, "Origin": {"http://evil.example"}})
	assert.Equal(t, http.StatusForbidden, code, "foreign origin")

	c, _, err := dial(http.Header{"Authorization": {"Bearer " + token}, "Origin": {"http://allowed.example"}})
	require.NoError(t, err)
	defer c.Close()
	f.Publish(balancer.Static([]string{"127.0.0.1:1"}, []float64{5}))
	_, raw, err := c.ReadMessage()
	require.NoError(t, err)
	m, err := weightfeed.DecodeWeights(raw)
	require.NoError(t, err)
	assert.Equal(t, 5.0, m.Workers[0].Weight)

	// A malformed report is counted and dropped; the connection lives on.
	require.NoError(t, c.WriteMessage(websocket.TextMessage, []byte(`{"type":"tally","workers":[{"id":"","active":1}]}`)))
	good, _ := json.Marshal(weightfeed.Tally{Type: weightfeed.TypeTally, Balancer: "b", Workers: []weightfeed.WorkerTally{{ID: "w0", Active: 2}}})
	require.NoError(t, c.WriteMessage(websocket.TextMessage, good))
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, uint64(1), f.Rejected())
	assert.Equal(t, int64(2), got[0].Workers[0].Active)
}

func TestAgentRejectsBadConfig(t *testing.T) {
	_, err := agent.New(agent.Config{})
	assert.ErrorContains(t, err, "no runtime")
	_, err = agent.New(agent.Config{Runtime: runtime.NewProcess("x"), Pool: lifecycle.Config{Low: 90, High: 10}})
	assert.ErrorContains(t, err, "low < high")
}

func TestDashboardEndpoints(t *testing.T) {
	s := newStack(t, []runtime.Spec{{Name: "d1", CPULimit: 1, Default: true}}, lifecycle.Config{}, nil, false)
	code, body := get(t, s.srv.URL+"/")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "ringside deployment agent")
	code, body = get(t, s.srv.URL+"/api/state")
	assert.Equal(t, http.StatusOK, code)
	var v agent.View
	require.NoError(t, json.Unmarshal([]byte(body), &v))
	require.Len(t, v.Workers, 1)
	assert.Equal(t, "d1", v.Workers[0].Name)
	code, body = get(t, s.srv.URL+"/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `agent_worker_state{state="low",worker="d1"} 1`, "an idle worker is Low")
}
