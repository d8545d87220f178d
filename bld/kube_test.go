package bld

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/ringside/ringside/internal/kubelocal"
)

var (
	cs    *kubernetes.Clientset
	rc    *rest.Config
	nsSeq atomic.Int64
)

// TestMain runs every test of the package against one real control plane.
func TestMain(m *testing.M) {
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	os.Exit(func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		dir, err := os.MkdirTemp("", "bld-kube-")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		cp, err := kubelocal.Start(ctx, dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "control plane:", err)
			return 1
		}
		defer cp.Stop()
		if rc, err = cp.RestConfig(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if cs, err = cp.Clientset(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for _, n := range []string{"w1", "w2", "w3"} {
			if _, err := cs.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		return m.Run()
	}())
}

// namespace returns a fresh namespace: they never finish deleting here.
func namespace(t *testing.T) string {
	t.Helper()
	ns := fmt.Sprintf("t%d-%d", time.Now().UnixNano()%1e6, nsSeq.Add(1))
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return ns
}

func pod(t *testing.T, ns, name, election, node string) {
	t.Helper()
	if _, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{}); err == nil {
		return
	}
	_, err := cs.CoreV1().Pods(ns).Create(context.Background(), &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{ElectionLabel: election}},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "app", Image: "none"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// leaders collects who is leading, per election, from the candidates' events.
type leaders struct {
	mu      sync.Mutex
	leading map[string]map[string]bool // election → ids leading now
	started map[string]time.Time
	overlap int
}

func newLeaders() *leaders {
	return &leaders{leading: map[string]map[string]bool{}, started: map[string]time.Time{}}
}

func (l *leaders) hook(election, id string) func(string, string) {
	return func(event, _ string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.leading[election] == nil {
			l.leading[election] = map[string]bool{}
		}
		switch event {
		case "started":
			if len(l.leading[election]) > 0 {
				l.overlap++
			}
			l.leading[election][id] = true
			l.started[id] = time.Now()
		case "stopped":
			delete(l.leading[election], id)
		}
	}
}

func (l *leaders) of(election string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for id := range l.leading[election] {
		out = append(out, id)
	}
	return out
}

type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	c      *Candidate
}

func (r running) stop() {
	r.cancel()
	<-r.done
}

// campaign runs one replica in-process: its Pod, its sidecar HTTP
// endpoint, its candidate.
func campaign(t *testing.T, l *leaders, alg, lock, ns, election, id, node string) running {
	t.Helper()
	pod(t, ns, id, election, node)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c, err := NewCandidate(CandidateConfig{
		Algorithm: alg, Lock: lock, Election: election, Namespace: ns, Identity: id, Node: node, Client: cs,
		ProbeAddr:     ln.Addr().String(),
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
		OnEvent: l.hook(election, id), Log: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	srv := &http.Server{Handler: c.Handler()}
	go srv.Serve(ln)
	ctx, cancel := context.WithCancel(context.Background())
	r := running{cancel: cancel, done: make(chan struct{}), c: c}
	go func() { defer close(r.done); defer srv.Close(); c.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func waitLeader(t *testing.T, l *leaders, election string, within time.Duration) string {
	t.Helper()
	var got []string
	require.Eventually(t, func() bool { got = l.of(election); return len(got) == 1 }, within, 20*time.Millisecond, "one leader for %s", election)
	return got[0]
}

// TestFirstTryDialsOnce: a BLD candidate's first try reads the lock and,
// beside it, the record, on a client that has no connection yet. Sent at
// once, the two reads would each dial and handshake TLS, at the moment a
// burst of candidates loads the API server most.
func TestFirstTryDialsOnce(t *testing.T) {
	ns := namespace(t)
	cfg := rest.CopyConfig(rc)
	var dials atomic.Int32
	var d net.Dialer
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	l := newLeaders()
	c, err := NewCandidate(CandidateConfig{
		Algorithm: BLD, Election: "app", Namespace: ns, Identity: "app-0", Node: "w1", Client: client,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		OnEvent: l.hook("app", "app-0"), Log: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitLeader(t, l, "app", 10*time.Second)
	assert.EqualValues(t, 1, dials.Load(), "connections dialled to the API server")
}

func TestDefaultElectsOneAndFailsOver(t *testing.T) {
	for _, lock := range []string{LockLease, LockEndpoints} {
		t.Run(lock, func(t *testing.T) {
			ns, l := namespace(t), newLeaders()
			rs := map[string]running{}
			for i, node := range []string{"w1", "w2", "w3"} {
				id := fmt.Sprint("app-", i)
				rs[id] = campaign(t, l, Default, lock, ns, "app", id, node)
			}
			first := waitLeader(t, l, "app", 10*time.Second)
			rs[first].stop() // releases the lease on the way out
			second := waitLeader(t, l, "app", 10*time.Second)
			assert.NotEqual(t, first, second)
			assert.Zero(t, l.overlap, "never two leaders at once")
			if lock == LockEndpoints {
				ep, err := cs.CoreV1().Endpoints(ns).Get(context.Background(), "app", metav1.GetOptions{})
				require.NoError(t, err)
				assert.Contains(t, ep.Annotations[LeaderAnnotation], `"holderIdentity":"`+second+`"`)
			}
		})
	}
}

func TestBLDPrefersTheEmptyNode(t *testing.T) {
	ns, l := namespace(t), newLeaders()
	rec := &Record{Client: cs.CoreV1(), Namespace: ns}
	ctx := context.Background()
	for app, node := range map[string]string{"a": "w1", "b": "w2"} {
		ok, err := rec.Reserve(ctx, nil, app, app+"-0", node, "", 0, func(Placement) (bool, error) { return true, nil })
		require.NoError(t, err)
		require.True(t, ok)
	}
	for i, node := range []string{"w1", "w2", "w3"} {
		campaign(t, l, BLD, LockLease, ns, "c", fmt.Sprint("c-", i), node)
	}
	assert.Equal(t, "c-2", waitLeader(t, l, "c", 10*time.Second), "only w3 satisfies N·c ≤ L")
	p, err := rec.Placement(ctx)
	require.NoError(t, err)
	assert.Equal(t, "w3", p["c"])
}

func TestLiteralBLDAllowsACrowdedNode(t *testing.T) {
	ns, l := namespace(t), newLeaders()
	rec := &Record{Client: cs.CoreV1(), Namespace: ns}
	for app, node := range map[string]string{"a": "w1", "b": "w2"} {
		_, err := rec.Reserve(context.Background(), nil, app, app+"-0", node, "", 0, func(Placement) (bool, error) { return true, nil })
		require.NoError(t, err)
	}
	campaign(t, l, BLDLiteral, LockLease, ns, "c", "c-0", "w1")
	assert.Equal(t, "c-0", waitLeader(t, l, "c", 10*time.Second), "c ≤ (L+1)/N = 1 holds on w1")
}

func TestConstrainedPlacement(t *testing.T) {
	// c's replicas sit on w1 and w2, both holding two leaders, w3 none.
	setup := func(t *testing.T, alg string) *leaders {
		ns, l := namespace(t), newLeaders()
		rec := &Record{Client: cs.CoreV1(), Namespace: ns}
		for app, node := range map[string]string{"a": "w1", "b": "w2", "x": "w1", "y": "w2"} {
			_, err := rec.Reserve(context.Background(), nil, app, app+"-0", node, "", 0, func(Placement) (bool, error) { return true, nil })
			require.NoError(t, err)
		}
		for i, node := range []string{"w1", "w2"} {
			campaign(t, l, alg, LockLease, ns, "c", fmt.Sprint("c-", i), node)
		}
		return l
	}
	t.Run("bld starves", func(t *testing.T) {
		l := setup(t, BLD)
		time.Sleep(2 * time.Second)
		assert.Empty(t, l.of("c"), "BLD's failure mode: no candidate qualifies")
	})
	t.Run("bld-plus elects", func(t *testing.T) {
		l := setup(t, BLDPlus)
		waitLeader(t, l, "c", 10*time.Second)
	})
}

func TestConcurrentApplicationsCannotCrowdOneNode(t *testing.T) {
	for round := range 3 {
		ns, l := namespace(t), newLeaders()
		var rs []running
		for _, app := range []string{"a", "b", "c"} {
			for i, node := range []string{"w1", "w2", "w3"} {
				id := fmt.Sprintf("%s-%d", app, i)
				rs = append(rs, campaign(t, l, BLD, LockLease, ns, app, id, node))
			}
		}
		nodes := map[string]bool{}
		for _, app := range []string{"a", "b", "c"} {
			id := waitLeader(t, l, app, 15*time.Second)
			node := "w" + string(id[len(id)-1]+1)
			nodes[node] = true
		}
		assert.Len(t, nodes, 3, "round %d: three applications, three nodes", round)
		for _, r := range rs {
			r.stop()
		}
	}
}

func TestRankedHandsOverWithoutWaitingOutTheLease(t *testing.T) {
	ns, l := namespace(t), newLeaders()
	rs := map[string]running{}
	for i, node := range []string{"w1", "w2", "w3"} {
		id := fmt.Sprint("r-", i)
		rs[id] = campaign(t, l, Ranked, LockLease, ns, "r", id, node)
	}
	leader := waitLeader(t, l, "r", 10*time.Second)
	// The ranking appears on the lock object.
	require.Eventually(t, func() bool {
		lease, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), "r", metav1.GetOptions{})
		return err == nil && lease.Annotations[SuccessorAnnotation] != ""
	}, 10*time.Second, 50*time.Millisecond)
	t0 := time.Now()
	rs[leader].stop()
	next := waitLeader(t, l, "r", 10*time.Second)
	assert.NotEqual(t, leader, next)
	l.mu.Lock()
	took := l.started[next].Sub(t0)
	l.mu.Unlock()
	assert.Less(t, took, time.Second, "hand-over, not a 3 s lease expiry")
}

func TestOneReservationPerApplication(t *testing.T) {
	rec := &Record{Client: cs.CoreV1(), Namespace: namespace(t)}
	ctx := context.Background()
	any := func(Placement) (bool, error) { return true, nil }
	ok, err := rec.Reserve(ctx, nil, "x", "x-0", "w1", "", time.Minute, any)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = rec.Reserve(ctx, nil, "x", "x-1", "w2", "", time.Minute, any)
	require.ErrorIs(t, err, ErrReserved, "a fresh reservation by another candidate stands")
	ok, err = rec.Reserve(ctx, nil, "x", "x-1", "w2", "x-0", time.Minute, any)
	require.NoError(t, err)
	assert.True(t, ok, "unless it belongs to the holder whose lease ran out")
	ok, err = rec.Reserve(ctx, nil, "x", "x-2", "w3", "", 0, any)
	require.NoError(t, err)
	assert.True(t, ok, "or it is no longer fresh")
	_, err = rec.Reserve(ctx, nil, "y", "y-0", "w1", "", time.Minute, func(Placement) (bool, error) { return false, io.ErrUnexpectedEOF })
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the balance condition's own error comes through")
	p, err := rec.Placement(ctx)
	require.NoError(t, err)
	assert.Equal(t, Placement{"x": "w3"}, p)
}

func TestLeaderRestoresItsRecordEntry(t *testing.T) {
	ns, l := namespace(t), newLeaders()
	rec := &Record{Client: cs.CoreV1(), Namespace: ns}
	campaign(t, l, BLD, LockLease, ns, "a", "a-0", "w2")
	leader := waitLeader(t, l, "a", 10*time.Second)
	// A candidate that reserved for an expired lease and then lost it
	// to the leader's renewal drops the application's entry.
	_, err := rec.Reserve(context.Background(), nil, "a", "a-9", "w1", leader, time.Minute, func(Placement) (bool, error) { return true, nil })
	require.NoError(t, err)
	require.NoError(t, rec.Release(context.Background(), "a", "a-9"))
	require.Eventually(t, func() bool {
		p, err := rec.Placement(context.Background())
		return err == nil && p["a"] == "w2"
	}, 5*time.Second, 50*time.Millisecond, "the leader writes its entry back within a retry period")
}
