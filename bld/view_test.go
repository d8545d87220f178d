package bld

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ringside/ringside/bld/balance"
)

func testLease(name, holder, node, rv string, renewed time.Time) *coordinationv1.Lease {
	secs := int32(10)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Annotations: map[string]string{LeaderNodeAnnotation: node}},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: &secs, RenewTime: &metav1.MicroTime{Time: renewed}}}
	if holder != "" {
		l.Spec.HolderIdentity = &holder
	}
	return l
}

func testPod(name, election, node string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{ElectionLabel: election}}, Spec: v1.PodSpec{NodeName: node}}
}

// Validation sees exactly the elections the watch delivered before the
// candidate's own write: earlier ones count, later ones and run-out ones
// do not.
func TestViewPlacesWritesInTheWatchOrder(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	v := newView("c", "c-0", "w1", fc, func() {})
	now := fc.Now()
	v.lease(testLease("a", "a-0", "w1", "10", now), false)
	v.lease(testLease("old", "old-0", "w3", "11", now.Add(-time.Minute)), false) // ran out long ago
	v.lease(testLease("c", "c-0", "w1", "12", now), false)                       // ours
	v.lease(testLease("b", "b-0", "w2", "13", now), false)

	p, err := v.placementAt(context.Background(), "12", time.Second)
	require.NoError(t, err)
	assert.Equal(t, balance.Placement{"a": "w1"}, p, "a went before our write; b after; old ran out")
	assert.Equal(t, balance.Placement{"a": "w1", "b": "w2"}, v.placement(), "now: every held Lease but ours")

	// A write that arrives while validation waits.
	got := make(chan balance.Placement, 1)
	go func() {
		p, err := v.placementAt(context.Background(), "14", 10*time.Second)
		assert.NoError(t, err)
		got <- p
	}()
	v.lease(testLease("c", "c-0", "w1", "14", now), false)
	assert.Equal(t, balance.Placement{"a": "w1", "b": "w2"}, <-got)

	_, err = v.placementAt(context.Background(), "99", time.Millisecond)
	assert.ErrorContains(t, err, "resourceVersion 99", "a write the watch never delivers fails validation, naming it")
	_, err = v.placementAt(context.Background(), "", time.Second)
	assert.Error(t, err)

	// Someone else's lease carrying our election's name in a deleted
	// tombstone is handled as a deletion.
	v.lease(cache.DeletedFinalStateUnknown{Key: "a", Obj: testLease("a", "a-0", "w1", "15", now)}, true)
	assert.Equal(t, balance.Placement{"b": "w2"}, v.placement())
}

// Every candidate that sees the same Pods picks the same candidate per
// election, and a burst of three elections over three nodes lands on
// three nodes with no write.
func TestViewSpreadsABurstWithoutWrites(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	nodes := []string{"w1", "w2", "w3"}
	var pods []*v1.Pod
	for _, app := range []string{"a", "b", "c"} {
		for i, n := range nodes {
			pods = append(pods, testPod(fmt.Sprintf("%s-%d", app, i), app, n))
		}
	}
	chosen := map[string]map[string]bool{} // election → the candidates that found it their turn
	for _, p := range pods {
		app, node := p.Labels[ElectionLabel], p.Spec.NodeName
		v := newView(app, p.Name, node, fc, func() {})
		for _, q := range pods {
			v.pod(q, false)
		}
		if v.turn(time.Second) {
			if chosen[app] == nil {
				chosen[app] = map[string]bool{}
			}
			chosen[app][p.Name] = true
		}
	}
	used := map[string]bool{}
	for _, app := range []string{"a", "b", "c"} {
		require.Len(t, chosen[app], 1, "one candidate of %s tries first", app)
		for id := range chosen[app] {
			used[id[len(id)-1:]] = true
		}
	}
	assert.Len(t, used, 3, "three elections, three nodes: %v", chosen)
}

// The candidates not chosen try once the election has been free for the
// grace (the chosen one may be gone); a held Lease is nobody's turn, and
// its holder's node counts even when its Pod is not seen.
func TestViewTurnAfterGrace(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	var kicks atomic.Int32
	v := newView("a", "a-1", "w2", fc, func() { kicks.Add(1) })
	v.pod(testPod("a-0", "a", "w1"), false)
	v.pod(testPod("a-1", "a", "w2"), false)
	assert.False(t, v.turn(100*time.Millisecond), "a-0 (w1) is chosen")
	require.Eventually(t, fc.HasWaiters, 5*time.Second, time.Millisecond, "a kick is set for the grace's end")
	fc.Step(100 * time.Millisecond)
	require.Eventually(t, func() bool { return kicks.Load() == 1 }, 5*time.Second, time.Millisecond, "kicked when the grace ends")
	assert.True(t, v.turn(100*time.Millisecond), "free for the grace: anyone may try")

	v.lease(testLease("a", "a-0", "w1", "5", fc.Now()), false)
	assert.False(t, v.turn(0), "held")
	v.lease(testLease("a", "", "w1", "6", fc.Now()), false)
	assert.Equal(t, int32(2), kicks.Load(), "freed: the waiting candidate looks again")
	v.lease(testLease("a", "a-0", "w1", "7", fc.Now()), false)
	fc.Step(11 * time.Second)
	assert.True(t, v.turn(100*time.Millisecond), "its term ran out a second ago")

	// b's leader sits on w1, its Pod unseen: a's choice leaves w1.
	w := newView("a", "a-1", "w2", fc, func() {})
	w.pod(testPod("a-0", "a", "w1"), false)
	w.pod(testPod("a-1", "a", "w2"), false)
	assert.False(t, w.turn(time.Second), "w1 comes first by name")
	w.lease(testLease("b", "b-0", "w1", "8", fc.Now()), false)
	assert.True(t, w.turn(time.Second), "w1 holds b's leader")
	w.pod(testPod("a-1", "a", "w2"), true)
	assert.True(t, w.turn(time.Second), "a candidate counts itself before its Pod shows")
}
