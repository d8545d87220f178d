package balancer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/balancer/pick"
	"github.com/ringside/ringside/internal/weightfeed"
)

var quiet = slog.New(slog.DiscardHandler)

func named(name string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", name, r.Method, body)
	}))
}

func addr(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

func send(t *testing.T, b http.Handler, method, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	b.ServeHTTP(rec, httptest.NewRequest(method, "/x", rd))
	return rec.Code, rec.Body.String()
}

func TestProxySpreadsByWeight(t *testing.T) {
	a, c := named("a"), named("c")
	defer a.Close()
	defer c.Close()
	b, err := New(Options{Log: quiet})
	require.NoError(t, err)
	code, _ := send(t, b, http.MethodGet, "")
	assert.Equal(t, http.StatusServiceUnavailable, code, "no table yet")

	require.NoError(t, b.Update(Static([]string{addr(a), addr(c)}, []float64{3, 1})))
	n := map[string]int{}
	for range 2000 {
		code, body := send(t, b, http.MethodGet, "")
		require.Equal(t, http.StatusOK, code)
		n[body[:1]]++
	}
	assert.InDelta(t, 1500, n["a"], 100)
	r := b.Tally("me")
	assert.Equal(t, "me", r.Balancer)
	require.Len(t, r.Workers, 2)
	assert.Equal(t, uint64(n["a"]), r.Workers[0].Requests)
	assert.Zero(t, r.Workers[0].Active, "bodies closed: nothing in flight")
}

func TestDeadWorkerRetriedForIdempotentRequests(t *testing.T) {
	live := named("live")
	defer live.Close()
	dead := named("dead")
	deadAddr := addr(dead)
	dead.Close()
	b, err := New(Options{Log: quiet})
	require.NoError(t, err)
	// The dead worker has most of the weight.
	require.NoError(t, b.Update(Static([]string{deadAddr, addr(live)}, []float64{99, 1})))
	for range 50 {
		code, body := send(t, b, http.MethodGet, "")
		require.Equal(t, http.StatusOK, code)
		assert.True(t, strings.HasPrefix(body, "live"))
	}
	// A PUT with a body and no Idempotency-Key is not replayed.
	failed := 0
	for range 50 {
		if code, _ := send(t, b, http.MethodPost, "payload"); code == http.StatusBadGateway {
			failed++
		}
	}
	assert.Greater(t, failed, 30, "most POSTs hit the dead worker and are not retried")
	rep := b.Tally("")
	var deadFailures uint64
	for _, w := range rep.Workers {
		if w.ID == "w0" {
			deadFailures = w.Failures
		}
	}
	assert.GreaterOrEqual(t, deadFailures, uint64(40+failed), "every attempt at the dead worker is counted (about 99 % of 100)")
}

func TestUpdateKeepsLastGoodTable(t *testing.T) {
	b, err := New(Options{Log: quiet})
	require.NoError(t, err)
	good := Static([]string{"10.0.0.1:1", "10.0.0.2:2"}, []float64{1, 2})
	good.Seq = 5
	require.NoError(t, b.Update(good))
	bad := good
	bad.Workers = []weightfeed.Worker{good.Workers[0]}
	bad.Workers[0].Weight = 0
	assert.ErrorContains(t, b.Update(bad), "weights are zero")
	old := good
	old.Seq = 4
	assert.ErrorContains(t, b.Update(old), "older")
	assert.Len(t, b.Workers(), 2)
}

func TestDrainedWorkerGetsNothing(t *testing.T) {
	a, c := named("a"), named("c")
	defer a.Close()
	defer c.Close()
	for _, algo := range pick.Algorithms {
		b, err := New(Options{Algorithm: algo, Log: quiet})
		require.NoError(t, err)
		m := Static([]string{addr(a), addr(c)}, []float64{0, 1})
		m.Workers[0].State = weightfeed.StateSundown
		require.NoError(t, b.Update(m))
		for range 50 {
			_, body := send(t, b, http.MethodGet, "")
			require.True(t, strings.HasPrefix(body, "c"), "%s sent to a drained worker", algo)
		}
	}
}

// fakeAgent is a feed server under the test's control.
type fakeAgent struct {
	srv     *httptest.Server
	mu      sync.Mutex
	conns   []*websocket.Conn
	reports chan weightfeed.Tally
	dials   atomic.Int32
}

func newFakeAgent(t *testing.T) *fakeAgent {
	f := &fakeAgent{reports: make(chan weightfeed.Tally, 100)}
	up := websocket.Upgrader{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.dials.Add(1)
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns = append(f.conns, c)
		f.mu.Unlock()
		for {
			_, raw, err := c.ReadMessage()
			if err != nil {
				return
			}
			if rep, err := weightfeed.DecodeTally(raw); err == nil {
				f.reports <- rep
			}
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAgent) push(t *testing.T, raw []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.conns)
	require.NoError(t, f.conns[len(f.conns)-1].WriteMessage(websocket.TextMessage, raw))
}

func (f *fakeAgent) dropAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

func TestFollowFeedRejectsBadMessagesAndReconnects(t *testing.T) {
	fa := newFakeAgent(t)
	b, err := New(Options{Log: quiet})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.Follow(ctx, FeedOptions{URL: "ws" + strings.TrimPrefix(fa.srv.URL, "http"), Token: "tok", Name: "b1",
		TallyEvery: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Self: []string{"10.9.9.9:8080"}})
	require.Eventually(t, func() bool { fa.mu.Lock(); defer fa.mu.Unlock(); return len(fa.conns) == 1 }, 5*time.Second, 10*time.Millisecond)

	good := Static([]string{"10.0.0.1:1", "10.0.0.2:2"}, []float64{1, 2})
	raw, _ := json.Marshal(good)
	fa.push(t, raw)
	require.Eventually(t, func() bool { return len(b.Workers()) == 2 }, 5*time.Second, 10*time.Millisecond)

	for _, bad := range []string{
		`{"type":"weights","seq":9,"workers":[{"id":"x","addr":"h:1","score":1,"category":"low","state":"active","weight":-1}]}`,
		`{"type":"weights","seq":9,"workers":[{"id":"x","addr":"h:1","score":1,"category":"low","state":"active","weight":0}]}`,
		`{"type":"weights","seq":9,"workers":[{"id":"x","addr":"h:1","score":1,"category":"low","state":"active","weight":NaN}]}`,
		`not json`,
	} {
		fa.push(t, []byte(bad))
	}
	// Addresses the feed may not name: this host's loopback, and the
	// balancer's own address.
	for _, a := range []string{"127.0.0.1:6379", "localhost:22", "[::1]:80", "0.0.0.0:9090", "10.9.9.9:8080"} {
		m := Static([]string{"10.0.0.1:1", a}, []float64{1, 1})
		m.Seq = 9
		raw, _ := json.Marshal(m)
		fa.push(t, raw)
	}
	require.Eventually(t, func() bool { return b.feedRejected.Load() == 9 }, 5*time.Second, 10*time.Millisecond)
	assert.Len(t, b.Workers(), 2, "the last good table stays")

	// Reports flow back.
	select {
	case rep := <-fa.reports:
		assert.Equal(t, "b1", rep.Balancer)
	case <-time.After(5 * time.Second):
		t.Fatal("no report from the balancer")
	}

	// The agent goes away: the table stays and the balancer redials.
	dials := fa.dials.Load()
	fa.dropAll()
	require.Eventually(t, func() bool { return fa.dials.Load() > dials }, 5*time.Second, 10*time.Millisecond)
	assert.Len(t, b.Workers(), 2)
	require.Eventually(t, func() bool { fa.mu.Lock(); defer fa.mu.Unlock(); return len(fa.conns) == 1 }, 5*time.Second, 10*time.Millisecond)
	three := Static([]string{"10.0.0.1:1", "10.0.0.2:2", "10.0.0.3:3"}, []float64{1, 2, 3})
	three.Seq = 2
	raw, _ = json.Marshal(three)
	fa.push(t, raw)
	require.Eventually(t, func() bool { return len(b.Workers()) == 3 }, 5*time.Second, 10*time.Millisecond)
}

// The per-worker state forgets workers that left: 10,000 worker IDs
// churned through the table leave only the current ones — and a worker
// that left while serving stays in the reports until its request is done,
// so the agent never reads it as idle while it serves.
func TestStateForgetsWorkersThatLeft(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-release
	}))
	defer slow.Close()
	b, err := New(Options{Log: quiet})
	require.NoError(t, err)
	require.NoError(t, b.Update(weightfeed.Weights{Type: weightfeed.TypeWeights, Seq: 1, Workers: []weightfeed.Worker{
		{ID: "draining", Addr: addr(slow), Score: 1, Category: weightfeed.CategoryLow, State: weightfeed.StateActive, Weight: 1}}}))
	resp, err := (&http.Client{Transport: &pickingTransport{b: b, next: NewTransport()}}).Get("http://balancer/x")
	require.NoError(t, err)

	for i := range 10_000 {
		m := Static([]string{"127.0.0.1:1", "127.0.0.1:2"}, []float64{1, 1})
		m.Seq = uint64(i + 2)
		m.Workers[0].ID, m.Workers[1].ID = fmt.Sprintf("w%d", 2*i), fmt.Sprintf("w%d", 2*i+1)
		require.NoError(t, b.Update(m))
	}
	r := b.Tally("b")
	require.Len(t, r.Workers, 3, "the two current workers and the one still serving")
	assert.Equal(t, "draining", r.Workers[0].ID)
	assert.Equal(t, int64(1), r.Workers[0].Active)
	raw, err := json.Marshal(r)
	require.NoError(t, err)
	_, err = weightfeed.DecodeTally(raw)
	require.NoError(t, err, "the agent accepts the report")

	close(release)
	resp.Body.Close()
	last := Static([]string{"127.0.0.1:1"}, []float64{1})
	last.Seq = 1 << 20
	require.NoError(t, b.Update(last))
	assert.Len(t, b.Tally("b").Workers, 1, "done and gone")
}
