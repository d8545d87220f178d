package cle

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/api/coordination/v1alpha2"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ringside/ringside/bld"
	"github.com/ringside/ringside/bld/strategy"
	"github.com/ringside/ringside/internal/kubefake"
)

func lease(name, holder string, renew time.Time, secs int32) *coordinationv1.Lease {
	st := coordinationv1.CoordinatedLeaseStrategy(strategy.Name)
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "x"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, Strategy: &st, LeaseDurationSeconds: &secs, RenewTime: &metav1.MicroTime{Time: renew}}}
}

func candidate(name, leaseName string, ann map[string]string, renew time.Time) *v1alpha2.LeaseCandidate {
	t := metav1.NewMicroTime(renew)
	return &v1alpha2.LeaseCandidate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "x", Annotations: ann},
		Spec: v1alpha2.LeaseCandidateSpec{LeaseName: leaseName, Strategy: strategy.Name, BinaryVersion: "1.0.0", RenewTime: &t}}
}

// running is a controller on cs in namespace x, looking every 50 ms,
// that reports its decisions on decided; stop ends it and checks Run's
// error.
type running struct {
	ctl     *Controller
	decided chan strategy.Decision
	stop    func()
}

func run(t *testing.T, cs *fake.Clientset, gather time.Duration, log *slog.Logger) running {
	t.Helper()
	r := running{decided: make(chan strategy.Decision, 16)}
	var err error
	r.ctl, err = New(Config{Client: cs, Namespace: "x", AckWait: 200 * time.Millisecond, Gather: gather, Resync: 50 * time.Millisecond,
		Log: log, OnDecision: func(_ string, d strategy.Decision) { r.decided <- d }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.ctl.Run(ctx) }()
	r.stop = func() { cancel(); require.NoError(t, <-done) }
	return r
}

// next is the controller's next decision.
func (r running) next(t *testing.T) strategy.Decision {
	t.Helper()
	select {
	case d := <-r.decided:
		return d
	case <-time.After(30 * time.Second):
		t.Fatal("no decision within 30 s")
		return strategy.Decision{}
	}
}

// Records a candidate controls are input like any other: a node
// annotation that is missing, not a node name or absurdly long leaves
// that candidate out (the others are still named), a Lease of another
// strategy is not touched, and a Lease held for the longest duration
// the field allows keeps its holder.
func TestHostileRecordsAreLeftOut(t *testing.T) {
	now := time.Now()
	past := now.Add(-time.Minute)
	node := func(n string) map[string]string { return map[string]string{bld.NodeAnnotation: n} }
	other := lease("other", bld.Unassigned, past, 1)
	foreign := coordinationv1.CoordinatedLeaseStrategy("example.com/other")
	other.Spec.Strategy = &foreign
	cs := fake.NewClientset(
		lease("a", bld.Unassigned, past, 2),
		lease("b", bld.Unassigned, past, 2),
		lease("held", "someone", now, 1<<31-1),
		other,
		candidate("good", "a", node("w1"), now),
		candidate("traversal", "a", node("../../w1"), now),
		candidate("none", "b", nil, now),
		candidate("long", "b", node(strings.Repeat("w", 300)), now),
		candidate("upper", "b", node("W1"), now),
		candidate("c-held", "held", node("w2"), now),
		candidate("c-other", "other", node("w3"), now),
	)
	r := run(t, cs, 0, slog.New(slog.DiscardHandler))
	first := r.next(t)
	require.Equal(t, strategy.Decision{Election: "a", Holder: "good"}, first)
	// Let it look several times more; nothing else may be decided (the
	// fake API server does not refuse a write on a stale
	// resourceVersion, so the same decision may come again before the
	// cache has the first).
	for range 5 {
		r.ctl.poke()
		select {
		case d := <-r.decided:
			require.Equal(t, first, d, "a decision for a hostile or foreign record")
		case <-time.After(100 * time.Millisecond):
		}
	}
	r.stop()
	for _, name := range []string{"b", "held", "other"} {
		l, err := cs.CoordinationV1().Leases("x").Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotContains(t, []string{"none", "long", "upper", "traversal", "c-other"}, *l.Spec.HolderIdentity, name)
		require.Nil(t, l.Spec.PreferredHolder, name)
	}
}

// A candidate counts at the node its Pod is bound to, whatever its own
// annotation says: b-1 claims an empty node but runs beside a's leader,
// so the candidate truly on an empty node is named. A candidate with no
// Pod the controller sees keeps its annotation.
func TestCandidatesCountAtTheirPodsNode(t *testing.T) {
	now := time.Now()
	node := func(n string) map[string]string { return map[string]string{bld.NodeAnnotation: n} }
	pod := func(name, election, node string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "x", Labels: map[string]string{bld.ElectionLabel: election}},
			Spec: v1.PodSpec{NodeName: node}}
	}
	for _, tc := range []struct {
		name string
		pods []runtime.Object
		want string
	}{
		{"the Pod's node counts", []runtime.Object{pod("a-1", "a", "w1"), pod("b-1", "b", "w1"), pod("b-2", "b", "w3"),
			// Counted at its Pod's node too; its annotation is no node name.
			candidate("b-3", "b", node(strings.Repeat("w", 100_000)), now), pod("b-3", "b", "w3")}, "b-2"},
		{"no Pods: the annotations count", nil, "b-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := append([]runtime.Object{
				lease("a", "a-1", now, 60), // a leader on w1 already
				candidate("a-1", "a", node("w1"), now),
				lease("b", bld.Unassigned, now.Add(-2*time.Second), 2),
				candidate("b-1", "b", node("w2"), now),
				candidate("b-2", "b", node("w3"), now),
			}, tc.pods...)
			var logs strings.Builder
			r := run(t, fake.NewClientset(objs...), 0, slog.New(slog.NewTextHandler(&logs, nil)))
			require.Equal(t, strategy.Decision{Election: "b", Holder: tc.want}, r.next(t))
			r.stop()
			if tc.pods != nil {
				require.Contains(t, logs.String(), "annotated=w2 pod_node=w1", "the disagreement is logged")
				require.Contains(t, logs.String(), "annotated="+strings.Repeat("w", 253)+" pod_node=w3", "a hostile annotation is logged cut to a node name's length")
			}
		})
	}
}

// A candidate whose Pod is being deleted (its node drained) is not named,
// though its node is the emptier: the Lease goes to the other.
func TestACandidateWhosePodIsDeletedIsNotNamed(t *testing.T) {
	now := time.Now()
	node := func(n string) map[string]string { return map[string]string{bld.NodeAnnotation: n} }
	deleted := metav1.NewTime(now)
	r := run(t, fake.NewClientset(
		lease("a", "a-1", now, 60), candidate("a-1", "a", node("w1"), now),
		lease("b", bld.Unassigned, now.Add(-2*time.Second), 2),
		candidate("b-1", "b", node("w1"), now), candidate("b-2", "b", node("w2"), now),
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b-2", Namespace: "x", DeletionTimestamp: &deleted, Finalizers: []string{"x/y"},
			Labels: map[string]string{bld.ElectionLabel: "b"}}, Spec: v1.PodSpec{NodeName: "w2"}},
	), 0, slog.New(slog.DiscardHandler))
	require.Equal(t, strategy.Decision{Election: "b", Holder: "b-1"}, r.next(t))
	r.stop()
}

// A new application's Lease waits for a candidate whose Pod is bound to
// an emptier node and that has not registered yet, and names it once it
// does; with no such Pod (or once Gather has passed) the registered
// candidate is named at once.
func TestNewLeaseWaitsForTheCandidateOfAPodOnAnEmptierNode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		gather time.Duration
		pod    string // the late candidate's Pod node ("": no Pod)
		want   string
	}{
		{"waits for the emptier node", time.Minute, "w2", "b-2"},
		{"a Pod on a fuller node is not waited for", time.Minute, "w1", "b-1"},
		{"no Pod", time.Minute, "", "b-1"},
		{"gather passed", time.Nanosecond, "w2", "b-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now()
			node := func(n string) map[string]string { return map[string]string{bld.NodeAnnotation: n} }
			objs := []runtime.Object{
				lease("a", "a-1", now, 60), // a leader on w1 already
				candidate("a-1", "a", node("w1"), now),
				candidate("a-2", "a", node("w2"), now),
				lease("b", bld.Unassigned, now.Add(-2*time.Second), 2), // new: free since now
				candidate("b-1", "b", node("w1"), now),
			}
			if tc.pod != "" {
				objs = append(objs, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b-2", Namespace: "x", Labels: map[string]string{bld.ElectionLabel: "b"}},
					Spec: v1.PodSpec{NodeName: tc.pod}})
			}
			cs := fake.NewClientset(objs...)
			r := run(t, cs, tc.gather, slog.New(slog.DiscardHandler))
			defer r.stop()
			if tc.want == "b-2" {
				r.none(t) // b is not decided while b-2 is on its way
				_, err := cs.CoordinationV1alpha2().LeaseCandidates("x").Create(t.Context(), candidate("b-2", "b", node("w2"), time.Now()), metav1.CreateOptions{})
				require.NoError(t, err)
			}
			require.Equal(t, strategy.Decision{Election: "b", Holder: tc.want}, r.next(t))
		})
	}
}

// A wait that is not a wait is refused with the setting named.
func TestNewRefusesBadWaits(t *testing.T) {
	cs := fake.NewClientset()
	for want, cfg := range map[string]Config{"ack wait": {Client: cs, AckWait: 0}, "gather": {Client: cs, AckWait: time.Second, Gather: -time.Second}} {
		_, err := New(cfg)
		require.ErrorContains(t, err, want)
	}
	ctl, err := New(Config{Client: cs, AckWait: time.Second})
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, ctl.cfg.Gather, "the default gather")
}

// A candidate Pod's status updates do not wake the controller; its
// binding, deletion and end do.
func TestPlacementChanged(t *testing.T) {
	pod := func(node string, deleting bool, phase v1.PodPhase) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{NodeName: node}, Status: v1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		return p
	}
	base := pod("w1", false, v1.PodRunning)
	require.False(t, placementChanged(base, pod("w1", false, v1.PodRunning)), "a status update")
	require.True(t, placementChanged(pod("", false, v1.PodPending), base), "bound")
	require.True(t, placementChanged(base, pod("w1", true, v1.PodRunning)), "deleting")
	require.True(t, placementChanged(base, pod("w1", false, v1.PodFailed)), "ended")
}

// The controller names a holder with a compare-and-swap on the Lease as it
// saw it: another writer's update landing between its look and its write
// (a holder taking the Lease) makes its write a conflict, never an
// overwrite. On the plain fake, which stores a stale version, this test
// fails: the controller's write replaces the intruder's.
func TestNamingLosesToAWriteInBetween(t *testing.T) {
	now := time.Now()
	// Versioned as an API server's are: an update naming no version would
	// be unconditional.
	cs := fake.NewClientset(versioned(lease("a", bld.Unassigned, now.Add(-time.Minute), 2), "1"),
		candidate("c1", "a", map[string]string{bld.NodeAnnotation: "w1"}, now))
	kubefake.Versioned(cs)
	var raced atomic.Bool
	cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if raced.Swap(true) {
			return false, nil, nil
		}
		in := lease("a", "intruder", time.Now(), 3600)
		in.ResourceVersion = "99999"
		assert.NoError(t, cs.Tracker().Update(coordinationv1.SchemeGroupVersion.WithResource("leases"), in, "x"))
		return false, nil, nil // the controller's own write goes on to the server
	})
	r := run(t, cs, 0, slog.New(slog.DiscardHandler))
	require.Eventually(t, raced.Load, 30*time.Second, 10*time.Millisecond, "the controller writes the free Lease")
	for range 5 { // and looks again, the intruder's write in its cache by now or soon
		r.ctl.poke()
		select {
		case <-r.decided:
		case <-time.After(100 * time.Millisecond):
		}
	}
	r.stop()
	l, err := cs.CoordinationV1().Leases("x").Get(context.Background(), "a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "intruder", *l.Spec.HolderIdentity, "the write in between stands")
}

// A new application's first holder is named from its Pods, but only an
// ack wait after the controller first saw them may it settle for a Pod
// on a fuller node: its Pods are created one by one, and the first
// Pod's creationTimestamp, in whole seconds, may already lie an ack wait
// back when it comes (seen under load: 2:1:0 leaders for three
// applications). The clock stands still until the case moves it, so
// nothing else can end the wait.
func TestAnAbsentElectionWaitsFromWhenItsPodsWereSeen(t *testing.T) {
	for _, tc := range []struct {
		name string
		late bool // b's Pod on the emptier node comes during the wait
		want string
	}{
		{"a Pod on the emptier node comes", true, "b-2"},
		{"none comes: the wait ends an ack wait after", false, "b-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 2, 24, 42, 775_000_000, time.UTC))
			now := fc.Now()
			node := func(n string) map[string]string { return map[string]string{bld.NodeAnnotation: n} }
			pod := func(name, node string) *v1.Pod { return strategyPod(name, "b", node, now.Truncate(time.Second)) }
			cs := fake.NewClientset(
				lease("a", "a-1", now, 60), // a leader on w1; w2 has none
				candidate("a-1", "a", node("w1"), now),
				candidate("a-2", "a", node("w2"), now),
				pod("b-1", "w1"), // b's first Pod, on the fuller node
			)
			r := runStill(t, cs, fc)
			r.none(t) // only b-1 is there
			if tc.late {
				_, err := cs.CoreV1().Pods("x").Create(t.Context(), pod("b-2", "w2"), metav1.CreateOptions{})
				require.NoError(t, err)
			} else {
				fc.Step(500 * time.Millisecond)
				r.ctl.poke()
			}
			assert.Equal(t, strategy.Decision{Election: "b", Holder: tc.want}, r.next(t))
		})
	}
}

// strategyPod is a candidate Pod of election that announces the strategy,
// bound to node.
func strategyPod(name, election, node string, created time.Time) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "x", Labels: map[string]string{bld.ElectionLabel: election},
		Annotations:       map[string]string{bld.StrategyAnnotation: strategy.Name, bld.LeaseDurationAnnotation: "10s"},
		CreationTimestamp: metav1.NewTime(created)},
		Spec: v1.PodSpec{NodeName: node}}
}

// runStill runs a controller on cs in namespace x with an ack wait of
// 500 ms by fc, a clock that moves only when the test steps it; it stops
// with the test.
func runStill(t *testing.T, cs *fake.Clientset, fc *clocktesting.FakeClock) running {
	t.Helper()
	r := running{decided: make(chan strategy.Decision, 16)}
	var err error
	r.ctl, err = New(Config{Client: cs, Namespace: "x", AckWait: 500 * time.Millisecond, Clock: fc, Log: slog.New(slog.DiscardHandler),
		OnDecision: func(_ string, d strategy.Decision) { r.decided <- d }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return r
}

// none makes the controller look several times and fails on any
// decision.
func (r running) none(t *testing.T) {
	t.Helper()
	for range 5 {
		r.ctl.poke()
		select {
		case d := <-r.decided:
			t.Fatalf("decided %+v during the wait", d)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// The nodes a new application's wait compares include those where the
// other applications' candidates are still on their way: Pods of held
// Leases that have not registered. Two applications named from their
// Pods, onto w1 and w2, their other Pods on w3 not registered yet; the
// third application's first Pod is on w2, and w3 is emptier (seen under
// load: named at once beside the second's leader, a move to undo).
func TestAnAbsentElectionCountsTheNodesOfPodsStillToRegister(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 2, 35, 36, 564_000_000, time.UTC))
	now := fc.Now()
	cs := fake.NewClientset(
		lease("a", "a-0", now, 10), strategyPod("a-0", "a", "w1", now), strategyPod("a-1", "a", "w3", now),
		lease("b", "b-2", now, 10), strategyPod("b-2", "b", "w2", now), strategyPod("b-0", "b", "w3", now),
		strategyPod("c-0", "c", "w2", now),
	)
	r := runStill(t, cs, fc)
	r.none(t)
	_, err := cs.CoreV1().Pods("x").Create(t.Context(), strategyPod("c-1", "c", "w3", now), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, strategy.Decision{Election: "c", Holder: "c-1"}, r.next(t))
}

// A Pod is anyone's to create who may create Pods: one of a held Lease's
// election bound to a node name that is none (reserved characters, past
// 253 bytes) adds no node to the counts, so a new application does not
// wait for a node that cannot come — it is named at once on the nodes
// there are.
func TestUnregisteredPodsOnUnusableNodesAreLeftOut(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 2, 35, 36, 564_000_000, time.UTC))
	now := fc.Now()
	cs := fake.NewClientset(
		lease("a", "a-0", now, 10), strategyPod("a-0", "a", "w1", now),
		strategyPod("a-1", "a", "W3/../x", now), strategyPod("a-2", "a", strings.Repeat("w", 300), now),
		lease("b", "b-2", now, 10), strategyPod("b-2", "b", "w2", now),
		strategyPod("c-0", "c", "w2", now),
	)
	r := runStill(t, cs, fc)
	assert.Equal(t, strategy.Decision{Election: "c", Holder: "c-0"}, r.next(t))
}
