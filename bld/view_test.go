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
	v := newView("c", "c-0", "w1", fc, func() { kicks.Add(1) })
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

// Holders whose acquisitions did not meet BLD's condition are no leaders,
// not even until they free their Leases: counted, they raise L and let a
// crowded node qualify. On kind a burst went that way: a leader on w1,
// one on w3, then three more writes onto w3 (each refused, freeing), and
// a second leader on w1 validated against L = 5 instead of 2.
func TestViewCountsOnlyValidLeaders(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	v := newView("g", "g-0", "w1", fc, func() {})
	v.setWorkers(3)
	now := fc.Now()
	v.lease(testLease("a", "a-0", "w1", "1", now), false)
	v.lease(testLease("b", "b-0", "w3", "2", now), false)
	for i, app := range []string{"c", "d", "e"} {
		v.lease(testLease(app, app+"-0", "w3", fmt.Sprint(3+i), now), false)
	}
	assert.Equal(t, balance.Placement{"a": "w1", "b": "w3"}, v.placement(), "c, d and e took w3 after b: N·c = 3 > L = 2")
	v.lease(testLease("g", "g-0", "w1", "6", now), false) // ours, on w1 beside a
	p, err := v.placementAt(context.Background(), "6", time.Second)
	require.NoError(t, err)
	assert.False(t, balance.Qualifies(balance.BLDOptimistic, "g", "w1", p, []string{"w1", "w2", "w3"}, nil), "our write onto w1 is refused: %v", p)

	// A renewal keeps its verdict; a new holder is judged anew.
	v.lease(testLease("c", "c-0", "w3", "7", now.Add(time.Second)), false)
	assert.NotContains(t, v.placement(), "c", "renewed, still no leader")
	v.lease(testLease("b", "", "w3", "8", now), false) // b freed
	v.lease(testLease("c", "c-1", "w3", "9", now), false)
	assert.Equal(t, balance.Placement{"a": "w1", "c": "w3"}, v.placement(), "w3 empty again: c's new holder qualifies")

	// A list has no commit order: judged in the order the acquisitions
	// were committed — the revision a renewed holder names, a fresh
	// holder's own — whatever the writers' clocks say (the processes run
	// that ended 3:1:1: a3's try began before a2's, its write landed after).
	l := newView("a4", "a4-0", "n2", fc, func() {})
	l.setWorkers(3)
	at := func(lease *coordinationv1.Lease, acquired time.Time, annotation string) *coordinationv1.Lease {
		lease.Spec.AcquireTime = &metav1.MicroTime{Time: acquired}
		if annotation != "" {
			lease.Annotations[AcquiredAnnotation] = annotation
		}
		return lease
	}
	listed := []any{
		at(testLease("a3", "a3-2", "n2", "11", now), now.Add(time.Second), ""),
		at(testLease("a2", "a2-2", "n0", "10", now), now.Add(2*time.Second), ""),
		at(testLease("a1", "a1-3", "n2", "50", now), now.Add(-time.Hour), "a1-3@6"), // renewed since
		at(testLease("a0", "a0-4", "n1", "5", now), now.Add(-time.Hour), ""),
		// An earlier holder's annotation does not date the new holder's
		// acquisition (60, last): judged at 1, z would have been first
		// onto an empty n2, and a1 refused after it.
		at(testLease("z", "z-1", "n2", "60", now), now.Add(-time.Hour), "z-0@1"),
	}
	store := &viewStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), v: l}
	require.NoError(t, store.Replace(listed, "60"))
	assert.Equal(t, balance.Placement{"a0": "n1", "a1": "n2", "a2": "n0", "a3": "n2"}, l.placement(),
		"a3 came after a2 (3·1 ≤ 3); z's new holder came last onto a crowded n2 (3·2 > 4)")
	l.mu.Lock()
	assert.False(t, l.qualifiesLocked("a4", "n2", now), "a fifth leader onto n2 is refused")
	l.mu.Unlock()

	// A renewal moves a Lease's resourceVersion past later acquisitions:
	// b1 took n2 at 6 and has renewed since (50); b3's write onto n2 at 11
	// came after it, and does not count (3·1 > 2).
	r := newView("b9", "b9-0", "n0", fc, func() {})
	r.setWorkers(3)
	store = &viewStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), v: r}
	require.NoError(t, store.Replace([]any{
		testLease("b3", "b3-0", "n2", "11", now),
		at(testLease("b1", "b1-0", "n2", "50", now), now.Add(-time.Hour), "b1-0@6"),
		testLease("b0", "b0-0", "n1", "5", now),
	}, "50"))
	assert.Equal(t, balance.Placement{"b0": "n1", "b1": "n2"}, r.placement())
}

// A candidate the gate refused looks again as soon as another
// application's leader comes, goes or moves — the balance it was refused
// on has changed — once per refusal, never for a renewal, and never while
// its own election has a holder. A change that came in while the gate
// was deciding kicks it at once.
func TestViewKicksARefusedCandidateWhenTheBalanceChanges(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	var kicks atomic.Int32
	v := newView("c", "c-0", "w1", fc, func() { kicks.Add(1) })
	now := fc.Now()
	v.lease(testLease("a", "a-0", "w1", "1", now), false)
	assert.Zero(t, kicks.Load(), "not refused: nothing to look again at")

	// refuse is the gate's refusal on the placement as the view has it.
	refuse := func(v *view) {
		_, seen := v.placementSeen()
		v.gated(false, seen)
	}
	refuse(v)
	assert.Zero(t, kicks.Load())
	v.lease(testLease("a", "a-0", "w1", "2", now.Add(time.Second)), false) // a renewal
	assert.Zero(t, kicks.Load(), "a renewal changes no balance")
	v.lease(testLease("b", "b-0", "w2", "3", now), false)
	assert.Equal(t, int32(1), kicks.Load(), "a leader elsewhere: look again")
	v.lease(testLease("d", "d-0", "w3", "4", now), false)
	assert.Equal(t, int32(1), kicks.Load(), "once per refusal")

	refuse(v)
	v.lease(testLease("b", "b-1", "w2", "5", now), false)
	assert.Equal(t, int32(2), kicks.Load(), "another holder is a change too")
	refuse(v)
	v.lease(testLease("d", "d-0", "w1", "6", now), false)
	assert.Equal(t, int32(3), kicks.Load(), "so is a leader on another node")
	refuse(v)
	v.lease(testLease("d", "", "w1", "7", now), false)
	assert.Equal(t, int32(4), kicks.Load(), "and a leader gone")

	_, seen := v.placementSeen()
	v.lease(testLease("e", "e-0", "w2", "8", now), false)
	v.gated(false, seen)
	assert.Equal(t, int32(5), kicks.Load(), "a change while the gate decided: at once")

	_, seen = v.placementSeen()
	v.gated(true, seen)
	v.lease(testLease("f", "f-0", "w3", "9", now), false)
	assert.Equal(t, int32(5), kicks.Load(), "admitted: no kick")

	refuse(v)
	v.lease(testLease("c", "c-1", "w2", "10", now), false)
	v.lease(testLease("g", "g-0", "w3", "11", now), false)
	assert.Equal(t, int32(5), kicks.Load(), "our election has a holder: its followers wait on it")

	// With N known, only a change that lets this candidate's node pass
	// kicks it: c-0 sits on w1 beside a.
	n := newView("c", "c-0", "w1", fc, func() { kicks.Add(1) })
	n.setWorkers(3)
	n.lease(testLease("a", "a-0", "w1", "1", now), false)
	refuse(n) // N·c = 3 > L = 1
	n.lease(testLease("b", "b-0", "w2", "2", now), false)
	assert.Equal(t, int32(5), kicks.Load(), "N·c = 3 > L = 2: still refused, no kick")
	n.lease(testLease("d", "d-0", "w3", "3", now), false)
	assert.Equal(t, int32(6), kicks.Load(), "N·c = 3 ≤ L = 3: look again")
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
		v := newView("mine", "me", "w1", fc, func() {})
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

// The view keeps its own election's Lease as last delivered, for the
// lock's reads, and answers only once the first list is in.
func TestViewKeepsItsOwnLease(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	v := newView("c", "c-0", "w1", fc, func() {})
	_, ok := v.own()
	assert.False(t, ok, "before the first list")
	v.setWorkers(3)
	s := &viewStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), v: v}
	require.NoError(t, s.Replace([]any{testLease("a", "a-0", "w2", "5", fc.Now())}, "5"))
	l, ok := v.own()
	assert.True(t, ok)
	assert.Nil(t, l, "listed, and absent")
	mine := testLease("c", "b-0", "w2", "6", fc.Now())
	require.NoError(t, s.Add(mine))
	l, _ = v.own()
	assert.Same(t, mine, l)
	require.NoError(t, s.Add(testLease("a", "a-1", "w3", "7", fc.Now())))
	l, _ = v.own()
	assert.Same(t, mine, l, "another election's Lease is not ours")
	require.NoError(t, s.Delete(mine))
	l, _ = v.own()
	assert.Nil(t, l, "deleted")
}
