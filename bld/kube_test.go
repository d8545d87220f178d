package bld

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ringside/ringside/bld/balance"
	"github.com/ringside/ringside/experiments/backend/kube/controlplane"
)

var (
	cs    *kubernetes.Clientset
	rc    *rest.Config
	nsSeq atomic.Int64
)

// TestMain runs every test of the package against one real control plane.
func TestMain(m *testing.M) {
	controlplane.TestMain(m, func(ctx context.Context, cp *controlplane.ControlPlane) (err error) {
		if rc, err = cp.RestConfig(); err != nil {
			return err
		}
		if cs, err = cp.Clientset(); err != nil {
			return err
		}
		return cp.CreateNodes(ctx, "w1", "w2", "w3")
	})
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
// It also counts each candidate's refusals, and gives
// the candidates their clock (nil: the real one).
type leaders struct {
	mu      sync.Mutex
	leading map[string]map[string]bool // election → ids leading now
	refused map[string]int             // id → refusals by the rule
	overlap int
	clock   clock.WithTicker
}

func newLeaders() *leaders {
	return &leaders{leading: map[string]map[string]bool{}, refused: map[string]int{}}
}

// refusedAtLeast reports whether every one of ids has been refused by
// the rule n times (its "refused" events).
func (l *leaders) refusedAtLeast(n int, ids ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		if l.refused[id] < n {
			return false
		}
	}
	return true
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
		case "stopped":
			delete(l.leading[election], id)
		case "refused":
			l.refused[id]++
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
	return campaignWith(t, cs, l, alg, lock, ns, election, id, node)
}

// campaignWith is campaign with a client of the test's own.
func campaignWith(t *testing.T, client kubernetes.Interface, l *leaders, alg, lock, ns, election, id, node string) running {
	t.Helper()
	pod(t, ns, id, election, node)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c, err := NewCandidate(CandidateConfig{
		Algorithm: alg, Lock: lock, Election: election, Namespace: ns, Identity: id, Node: node, Client: client,
		ProbeAddr:     ln.Addr().String(),
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
		OnEvent: l.hook(election, id), Clock: l.clock,
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

// tracedClient is a client that counts its connections to the API server
// and logs its requests as "VERB resource".
func tracedClient(t *testing.T) (client *kubernetes.Clientset, dials *atomic.Int32, requests func() []string) {
	t.Helper()
	cfg := rest.CopyConfig(rc)
	dials = &atomic.Int32{}
	var d net.Dialer
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
	var mu sync.Mutex
	var log []string
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			parts := strings.Split(r.URL.Path, "/") // …/<resource>[/<name>]
			resource := parts[len(parts)-1]
			if r.Method != http.MethodPost {
				resource = parts[len(parts)-2]
			}
			mu.Lock()
			log = append(log, r.Method+" "+resource)
			mu.Unlock()
			return rt.RoundTrip(r)
		})
	}
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return client, dials, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(log)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// place puts app's leader on node as alg's candidates read placements:
// an entry in the shared record, or, for bld-optimistic, a held Lease
// naming its holder's node.
func place(t *testing.T, alg, ns, app, node string) {
	t.Helper()
	ctx := context.Background()
	if alg != balance.BLDOptimistic {
		rec := &Record{Client: cs.CoreV1(), Namespace: ns}
		ok, err := rec.Reserve(ctx, nil, app, app+"-0", node, "", 0, func(balance.Placement) (bool, error) { return true, nil })
		require.NoError(t, err)
		require.True(t, ok)
		return
	}
	holder, secs := app+"-0", int32(600)
	_, err := cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: app, Annotations: map[string]string{LeaderNodeAnnotation: node}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// placedOn is the node alg's placements give app's leader.
func placedOn(t *testing.T, alg, ns, app string) string {
	t.Helper()
	ctx := context.Background()
	if alg != balance.BLDOptimistic {
		p, err := (&Record{Client: cs.CoreV1(), Namespace: ns}).Placement(ctx)
		require.NoError(t, err)
		return p[app]
	}
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, app, metav1.GetOptions{})
	require.NoError(t, err)
	return l.Annotations[LeaderNodeAnnotation]
}

// TestFirstTryOfANewElection: a BLD candidate of an election nobody has
// claimed in the record creates the lease without reading it first, and
// dials the API server once (reads sent side by side on a cold client
// would each dial and handshake TLS).
func TestFirstTryOfANewElection(t *testing.T) {
	ns, l := namespace(t), newLeaders()
	client, dials, requests := tracedClient(t)
	campaignWith(t, client, l, balance.BLD, LockLease, ns, "app", "app-0", "w1")
	waitLeader(t, l, "app", 10*time.Second)
	got := requests()
	require.GreaterOrEqual(t, len(got), 3)
	assert.Equal(t, []string{"GET configmaps", "POST configmaps", "POST leases"}, got[:3])
	assert.EqualValues(t, 1, dials.Load(), "connections dialled to the API server")
}

// TestFirstTryLeavesALeadersEntryAlone: a candidate that finds its
// election claimed in the record reads the lock before anything else, so
// it neither takes a held lease nor touches the leader's entry, however
// old.
func TestFirstTryLeavesALeadersEntryAlone(t *testing.T) {
	ns, l := namespace(t), newLeaders()
	ctx := context.Background()
	lock := &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Client: cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "app-0"}}
	now := metav1.Now()
	require.NoError(t, lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "app-0", LeaseDurationSeconds: 60, AcquireTime: now, RenewTime: now}))
	entry, _ := json.Marshal(Entry{Node: "w2", Holder: "app-0", Time: time.Now().Add(-time.Hour)})
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RecordName}, Data: map[string]string{"app": string(entry)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	client, _, requests := tracedClient(t)
	r := campaignWith(t, client, l, balance.BLD, LockLease, ns, "app", "app-1", "w1")
	require.Eventually(t, func() bool { return r.c.Leader() == "app-0" }, 5*time.Second, 20*time.Millisecond, "the candidate sees the leader")
	got := requests()
	require.GreaterOrEqual(t, len(got), 2)
	assert.Equal(t, []string{"GET configmaps", "GET leases"}, got[:2])
	assert.NotContains(t, got, "PUT configmaps")
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, RecordName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, string(entry), cm.Data["app"], "the leader's entry is untouched")
}

func TestDefaultElectsOneAndFailsOver(t *testing.T) {
	for _, lock := range []string{LockLease, LockEndpoints} {
		t.Run(lock, func(t *testing.T) {
			ns, l := namespace(t), newLeaders()
			rs := map[string]running{}
			for i, node := range []string{"w1", "w2", "w3"} {
				id := fmt.Sprint("app-", i)
				rs[id] = campaign(t, l, balance.Default, lock, ns, "app", id, node)
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
	for _, alg := range []string{balance.BLD, balance.BLDOptimistic} {
		t.Run(alg, func(t *testing.T) {
			ns, l := namespace(t), newLeaders()
			for app, node := range map[string]string{"a": "w1", "b": "w2"} {
				place(t, alg, ns, app, node)
			}
			for i, node := range []string{"w1", "w2", "w3"} {
				campaign(t, l, alg, LockLease, ns, "c", fmt.Sprint("c-", i), node)
			}
			assert.Equal(t, "c-2", waitLeader(t, l, "c", 10*time.Second), "only w3 satisfies N·c ≤ L")
			assert.Equal(t, "w3", placedOn(t, alg, ns, "c"))
			l.mu.Lock()
			assert.Zero(t, l.overlap, "never two leaders at once")
			l.mu.Unlock()
		})
	}
}

func TestLiteralBLDAllowsACrowdedNode(t *testing.T) {
	ns, l := namespace(t), newLeaders()
	rec := &Record{Client: cs.CoreV1(), Namespace: ns}
	for app, node := range map[string]string{"a": "w1", "b": "w2"} {
		_, err := rec.Reserve(context.Background(), nil, app, app+"-0", node, "", 0, func(balance.Placement) (bool, error) { return true, nil })
		require.NoError(t, err)
	}
	campaign(t, l, balance.BLDLiteral, LockLease, ns, "c", "c-0", "w1")
	assert.Equal(t, "c-0", waitLeader(t, l, "c", 10*time.Second), "c ≤ (L+1)/N = 1 holds on w1")
}

func TestConstrainedPlacement(t *testing.T) {
	// c's replicas sit on w1 and w2, both holding two leaders, w3 none.
	setup := func(t *testing.T, alg string) *leaders {
		ns, l := namespace(t), newLeaders()
		for app, node := range map[string]string{"a": "w1", "b": "w2", "x": "w1", "y": "w2"} {
			place(t, alg, ns, app, node)
		}
		for i, node := range []string{"w1", "w2"} {
			campaign(t, l, alg, LockLease, ns, "c", fmt.Sprint("c-", i), node)
		}
		return l
	}
	for _, alg := range []string{balance.BLD, balance.BLDOptimistic} {
		t.Run(alg+" starves", func(t *testing.T) {
			// Refused over and over (the gate's backoff reaches the retry
			// period within a few tries), and never elected.
			l := setup(t, alg)
			require.Eventually(t, func() bool { return l.refusedAtLeast(8, "c-0", "c-1") }, 20*time.Second, 20*time.Millisecond, "both candidates keep trying")
			assert.Empty(t, l.of("c"), "BLD's failure mode: no candidate qualifies")
		})
	}
	t.Run("bld-plus elects", func(t *testing.T) {
		l := setup(t, balance.BLDPlus)
		waitLeader(t, l, "c", 10*time.Second)
	})
}

func TestConcurrentApplicationsCannotCrowdOneNode(t *testing.T) {
	for _, alg := range []string{balance.BLD, balance.BLDOptimistic} {
		for round := range 3 {
			ns, l := namespace(t), newLeaders()
			var rs []running
			for _, app := range []string{"a", "b", "c"} {
				for i, node := range []string{"w1", "w2", "w3"} {
					id := fmt.Sprintf("%s-%d", app, i)
					rs = append(rs, campaign(t, l, alg, LockLease, ns, app, id, node))
				}
			}
			nodes := map[string]bool{}
			for _, app := range []string{"a", "b", "c"} {
				id := waitLeader(t, l, app, 15*time.Second)
				node := "w" + string(id[len(id)-1]+1)
				nodes[node] = true
			}
			assert.Len(t, nodes, 3, "%s round %d: three applications, three nodes", alg, round)
			l.mu.Lock()
			assert.Zero(t, l.overlap, "never two leaders at once")
			l.mu.Unlock()
			for _, r := range rs {
				r.stop()
			}
		}
	}
}

// The candidates' clock stands still: no lease can run out and no
// follower's retry comes due, so a successor can only be the hand-over's.
func TestRankedHandsOverWithoutWaitingOutTheLease(t *testing.T) {
	ns, l := namespace(t), newLeaders()
	l.clock = clocktesting.NewFakeClock(time.Now())
	rs := map[string]running{}
	for i, node := range []string{"w1", "w2", "w3"} {
		id := fmt.Sprint("r-", i)
		rs[id] = campaign(t, l, balance.Ranked, LockLease, ns, "r", id, node)
	}
	leader := waitLeader(t, l, "r", 10*time.Second)
	// The ranking appears on the lock object.
	require.Eventually(t, func() bool {
		lease, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), "r", metav1.GetOptions{})
		return err == nil && lease.Annotations[SuccessorAnnotation] != ""
	}, 10*time.Second, 50*time.Millisecond)
	rs[leader].stop()
	// The clock is frozen, so the lease never runs out: only the hand-over
	// can make a new leader. Its kick is one HTTP request with a short
	// timeout, which a loaded machine (the race detector, two busy loops)
	// has let expire; kicking again here stands in for the successor's
	// next retry, and only the successor the lease names can take it.
	var next []string
	require.Eventually(t, func() bool {
		for id, r := range rs {
			if id != leader {
				r.c.Kick()
			}
		}
		next = l.of("r")
		return len(next) == 1
	}, 10*time.Second, 50*time.Millisecond, "one leader for r")
	assert.NotEqual(t, leader, next[0])
}

func TestOneReservationPerApplication(t *testing.T) {
	rec := &Record{Client: cs.CoreV1(), Namespace: namespace(t)}
	ctx := context.Background()
	any := func(balance.Placement) (bool, error) { return true, nil }
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
	_, err = rec.Reserve(ctx, nil, "y", "y-0", "w1", "", time.Minute, func(balance.Placement) (bool, error) { return false, io.ErrUnexpectedEOF })
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the balance condition's own error comes through")
	p, err := rec.Placement(ctx)
	require.NoError(t, err)
	assert.Equal(t, balance.Placement{"x": "w3"}, p)
}

func TestLeaderRestoresItsRecordEntry(t *testing.T) {
	ns, l := namespace(t), newLeaders()
	rec := &Record{Client: cs.CoreV1(), Namespace: ns}
	campaign(t, l, balance.BLD, LockLease, ns, "a", "a-0", "w2")
	leader := waitLeader(t, l, "a", 10*time.Second)
	// A candidate that reserved for an expired lease and then lost it
	// to the leader's renewal drops the application's entry.
	_, err := rec.Reserve(context.Background(), nil, "a", "a-9", "w1", leader, time.Minute, func(balance.Placement) (bool, error) { return true, nil })
	require.NoError(t, err)
	require.NoError(t, rec.Release(context.Background(), "a", "a-9"))
	require.Eventually(t, func() bool {
		p, err := rec.Placement(context.Background())
		return err == nil && p["a"] == "w2"
	}, 5*time.Second, 50*time.Millisecond, "the leader writes its entry back within a retry period")
}

// A record with an entry that does not decode and one whose application
// died long ago still serves BLD: both are left out (and dropped by the
// next write), so the node the dead application held counts as free.
func TestRecordHealsBadAndExpiredEntries(t *testing.T) {
	ns, l := namespace(t), newLeaders()
	ctx := context.Background()
	entry := func(e Entry) string {
		b, err := json.Marshal(e)
		require.NoError(t, err)
		return string(b)
	}
	past := time.Now().Add(-time.Hour)
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RecordName}, Data: map[string]string{
		"a":    entry(Entry{Node: "w1", Holder: "a-0", Time: time.Now()}),
		"bad":  `{"node": 7`,
		"gone": entry(Entry{Node: "w2", Holder: "gone-0", Time: past, Expires: past.Add(time.Minute)}),
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	rec := &Record{Client: cs.CoreV1(), Namespace: ns}
	p, err := rec.Placement(ctx)
	require.NoError(t, err)
	assert.Equal(t, balance.Placement{"a": "w1"}, p)

	campaign(t, l, balance.BLD, LockLease, ns, "c", "c-0", "w1")
	campaign(t, l, balance.BLD, LockLease, ns, "c", "c-1", "w2")
	assert.Equal(t, "c-1", waitLeader(t, l, "c", 10*time.Second), "w2 is free: its entry expired")
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, RecordName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, cm.Data, "bad")
	assert.NotContains(t, cm.Data, "gone")
	var c Entry
	require.NoError(t, json.Unmarshal([]byte(cm.Data["c"]), &c))
	assert.True(t, c.Expires.After(time.Now()), "the leader's entry lasts while it renews: %+v", c)
}

// bld-optimistic's validation, with the gate out of the way (as when it
// passed on a view the watch had not brought up to date): a holder
// checks its node against the leaders committed before its write, and
// only those.
func TestOptimisticValidatesAgainstEarlierCommits(t *testing.T) {
	ns := namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder := func(app, id, node string) *Candidate {
		c, err := NewCandidate(CandidateConfig{Algorithm: balance.BLDOptimistic, Election: app, Namespace: ns, Identity: id, Node: node, Client: cs,
			LeaseDuration: 10 * time.Second, RenewDeadline: 8 * time.Second, RetryPeriod: 2 * time.Second})
		require.NoError(t, err)
		c.nodeLock.node = node
		c.view = newView(app, id, node, clock.RealClock{}, func() {})
		c.view.start(ctx, cs, ns)
		go c.countWorkers(ctx)
		c.view.waitSynced(ctx)
		return c
	}
	write := func(c *Candidate) {
		now := metav1.Now()
		require.NoError(t, c.nodeLock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: c.cfg.Identity, LeaseDurationSeconds: 10, AcquireTime: now, RenewTime: now}))
	}
	late, ok := holder("c", "c-0", "w1"), holder("d", "d-0", "w3")
	place(t, balance.BLDOptimistic, ns, "a", "w1")
	place(t, balance.BLDOptimistic, ns, "b", "w2")
	write(late)
	valid, err := late.validateInOrder(ctx, "")
	require.NoError(t, err)
	assert.False(t, valid, "a on w1 was committed first: N·c = 3 > L = 2")
	write(ok)
	// After d's write: d's validation must not count them (with them, w3
	// would hold 2 of L = 5, and N·c = 6 > 5).
	place(t, balance.BLDOptimistic, ns, "e", "w3")
	place(t, balance.BLDOptimistic, ns, "f", "w3")
	require.Eventually(t, func() bool {
		ok.view.mu.Lock()
		defer ok.view.mu.Unlock()
		_, seen := ok.view.leases["f"]
		return seen
	}, 10*time.Second, 5*time.Millisecond, "d's watch delivers them")
	valid, err = ok.validateInOrder(ctx, "")
	require.NoError(t, err)
	assert.True(t, valid, "w3 held none of the leaders committed before d's write")
	// e met the condition after d (N·c = 3 ≤ L = 3), f did not (6 > 4):
	// its holder frees it, and until then it is nobody's leader.
	assert.Equal(t, balance.Placement{"a": "w1", "b": "w2", "e": "w3"}, ok.view.placement(), "d's view: the valid leaders but its own")
	assert.Equal(t, balance.Placement{"a": "w1", "b": "w2", "d": "w3", "e": "w3"}, late.view.placement(), "c's view: d's write was valid, c's own was not")
	lease, err := cs.CoordinationV1().Leases(ns).Get(ctx, "d", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "w3", lease.Annotations[LeaderNodeAnnotation], "the Lease names its holder's node")
}

// A ranked leader annotates its lock with the ranking while it leads, and
// hands over with a write made without a read first. Its own annotation
// must move the lock's compare-and-swap base along, or that write fails
// on the resourceVersion the annotation moved on; a record someone else
// wrote in between must still make it fail.
func TestOwnAnnotationKeepsTheLockCurrent(t *testing.T) {
	ns, ctx := namespace(t), context.Background()
	for _, kind := range []string{LockLease, LockEndpoints} {
		lock := func(id string) annotatedLock {
			c, err := NewCandidate(CandidateConfig{Algorithm: balance.Ranked, Lock: kind, Election: "e-" + kind, Namespace: ns, Identity: id, Client: cs,
				LeaseDuration: 10 * time.Second, RenewDeadline: 8 * time.Second, RetryPeriod: 2 * time.Second})
			require.NoError(t, err)
			return c.lock.(termLock).annotatedLock
		}
		// Seconds apart: the Endpoints lock's record keeps whole seconds,
		// and a record equal to the one last written is no change.
		start := time.Now()
		record := func(holder string, renewed int) resourcelock.LeaderElectionRecord {
			return resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 10,
				AcquireTime: metav1.NewTime(start), RenewTime: metav1.NewTime(start.Add(time.Duration(renewed) * time.Second))}
		}
		a, b := lock("a"), lock("b")
		require.NoError(t, a.Create(ctx, record("a", 0)), kind)
		require.NoError(t, a.Annotate(ctx, map[string]string{SuccessorAnnotation: "ranking 1"}), kind)
		require.NoError(t, a.Update(ctx, record("b", 1)), "%s: a hand-over after the leader's own annotation", kind)
		ann, err := a.Annotations(ctx)
		require.NoError(t, err, kind)
		assert.Equal(t, "ranking 1", ann[SuccessorAnnotation], "%s: the record's write keeps the annotation", kind)

		_, _, err = b.Get(ctx)
		require.NoError(t, err, kind)
		require.NoError(t, b.Update(ctx, record("b", 2)), "%s: b renews", kind)
		require.NoError(t, a.Annotate(ctx, map[string]string{SuccessorAnnotation: "ranking 2"}), kind)
		err = a.Update(ctx, record("a", 3))
		assert.True(t, apierrors.IsConflict(err), "%s: a write over b's renewal, which a never read: %v", kind, err)
	}
}
