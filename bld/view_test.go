package bld

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
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

// Validation sees exactly the elections the watch delivered before the
// candidate's own write: earlier ones count, later ones and run-out ones
// do not.
func TestViewPlacesWritesInTheWatchOrder(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	var kicks atomic.Int32
	v := newView("c", "c-0", fc, func() { kicks.Add(1) })
	now := fc.Now()
	assert.True(t, v.unclaimed())
	v.lease(testLease("a", "a-0", "w1", "10", now), false)
	v.lease(testLease("old", "old-0", "w3", "11", now.Add(-time.Minute)), false) // ran out long ago
	v.lease(testLease("c", "c-0", "w1", "12", now), false)                       // ours
	v.lease(testLease("b", "b-0", "w2", "13", now), false)
	forever := testLease("x", "x-0", "w3", "13a", now)
	*forever.Spec.LeaseDurationSeconds = 1 << 30 // 34 years: no candidate's
	v.lease(forever, false)
	v.lease(testLease("y", "y-0", "w3", "13b", now.Add(24*time.Hour)), false) // renewed tomorrow

	p, err := v.placementAt(context.Background(), "12", time.Second)
	require.NoError(t, err)
	assert.Equal(t, balance.Placement{"a": "w1"}, p, "a went before our write; b after; old ran out")
	assert.Equal(t, balance.Placement{"a": "w1", "b": "w2"}, v.placement(), "now: every held Lease but ours, and but those held too far ahead")

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

	// A tombstone is a deletion.
	v.lease(cache.DeletedFinalStateUnknown{Key: "a", Obj: testLease("a", "a-0", "w1", "15", now)}, true)
	assert.Equal(t, balance.Placement{"b": "w2"}, v.placement())

	assert.Zero(t, kicks.Load())
	v.lease(testLease("c", "", "w1", "16", now), false)
	assert.Equal(t, int32(1), kicks.Load(), "our election's Lease freed: look again at once")
	v.lease(testLease("c", "", "w1", "17", now), false)
	assert.Equal(t, int32(1), kicks.Load(), "once per release")
	assert.False(t, v.unclaimed(), "the Lease exists")
}

// A Lease is anyone's to write who may update it: whatever it holds, the
// placement counts it exactly when it names a holder and a node and its
// term runs now, within what a candidate can claim.
func FuzzViewPlacement(f *testing.F) {
	f.Add("a-0", "w1", int64(0), int32(10))
	f.Add("", "w1", int64(0), int32(10))
	f.Add("a-0", "", int64(-11e9), int32(10))
	f.Add("a-0", "w2", int64(1e18), int32(-1))
	f.Add("a-0", "w3", int64(0), int32(1<<30))
	f.Fuzz(func(t *testing.T, holder, node string, renewOffset int64, secs int32) {
		fc := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
		now := fc.Now()
		v := newView("mine", "me", fc, func() {})
		l := testLease("theirs", holder, node, "1", now.Add(time.Duration(renewOffset)))
		*l.Spec.LeaseDurationSeconds = secs
		v.lease(l, false)
		end := now.Add(time.Duration(renewOffset)).Add(time.Duration(secs) * time.Second)
		want := holder != "" && node != "" && now.Before(end) &&
			time.Duration(secs)*time.Second <= MaxLease && renewOffset <= int64(MaxLease)
		got, ok := v.placement()["theirs"]
		if ok != want || ok && got != node {
			t.Fatalf("holder %q node %q renewed %v from now for %ds: placed %v (%q), want %v", holder, node, time.Duration(renewOffset), secs, ok, got, want)
		}
	})
}

func TestOptimisticRunsOnTheLeaseLockOnly(t *testing.T) {
	_, err := NewCandidate(CandidateConfig{Algorithm: "bld-optimistic", Lock: LockEndpoints, Election: "app", Namespace: "ns", Identity: "p", Client: cs,
		LeaseDuration: 10 * time.Second, RenewDeadline: 8 * time.Second, RetryPeriod: 2 * time.Second})
	assert.ErrorContains(t, err, `lock "endpoints": bld-optimistic keeps its leader record in the namespace's Leases`)
}
