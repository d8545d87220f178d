package bld

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

func lease(holder, rv string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns", ResourceVersion: rv},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](10)}}
}

// watchedFixture is a watchedLock on a fake API server holding apiLease,
// whose view shows *watched, and the requests the API server saw.
type watchedFixture struct {
	lock    *watchedLock
	watched *coordinationv1.Lease
	synced  bool
	cs      *fake.Clientset
}

func newWatchedFixture(apiLease *coordinationv1.Lease) *watchedFixture {
	f := &watchedFixture{synced: true, cs: fake.NewSimpleClientset(apiLease)}
	tracked := &trackedLeaseLock{meta: metav1.ObjectMeta{Name: "app", Namespace: "ns"}, client: f.cs.CoordinationV1(), identity: "me", node: "w1"}
	f.lock = &watchedLock{trackedLeaseLock: tracked, own: func() (*coordinationv1.Lease, bool) { return f.watched, f.synced }}
	return f
}

func (f *watchedFixture) gets() int {
	n := 0
	for _, a := range f.cs.Actions() {
		if a.GetVerb() == "get" {
			n++
		}
	}
	return n
}

func TestWatchedLockReadsFromTheView(t *testing.T) {
	ctx := context.Background()
	f := newWatchedFixture(lease("", "7"))
	f.watched = lease("", "7")

	rec, _, err := f.lock.Get(ctx)
	require.NoError(t, err)
	assert.Empty(t, rec.HolderIdentity, "released")
	assert.Zero(t, f.gets(), "a candidate that does not hold reads the watched Lease")
	// The write's base is the watched Lease: a compare-and-swap on it.
	var sentRV string
	f.cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sentRV = a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).ResourceVersion
		return false, nil, nil
	})
	require.NoError(t, f.lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}))
	assert.Equal(t, "7", sentRV)

	// Now the lock holds: its renewals read the API server.
	_, _, err = f.lock.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, f.gets(), "the holder reads the API server")
}

func TestWatchedLockFindsAnAbsentLeaseInTheView(t *testing.T) {
	f := newWatchedFixture(lease("other", "3"))
	_, _, err := f.lock.Get(context.Background())
	assert.True(t, apierrors.IsNotFound(err), "absent from the view: %v", err)
	assert.Zero(t, f.gets())
	// Creating what the view showed absent fails on the API server...
	err = f.lock.Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"})
	assert.True(t, apierrors.IsAlreadyExists(err), "%v", err)
	// ...and the next read asks the API server, once.
	rec, _, err := f.lock.Get(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "other", rec.HolderIdentity)
	assert.Equal(t, 1, f.gets())
	f.watched = lease("other", "3")
	_, _, err = f.lock.Get(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, f.gets(), "the view is trusted again once the API server was read")
}

func TestWatchedLockDistrustsAViewAWriteLostOn(t *testing.T) {
	ctx := context.Background()
	f := newWatchedFixture(lease("other", "9"))
	f.watched = lease("", "8") // the watch has not delivered "other"'s write
	f.cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).ResourceVersion != "9" {
			return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), "app", assert.AnError)
		}
		return false, nil, nil
	})
	_, _, err := f.lock.Get(ctx)
	require.NoError(t, err)
	assert.True(t, apierrors.IsConflict(f.lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})))
	rec, _, err := f.lock.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, "other", rec.HolderIdentity, "read from the API server after the lost write")
	assert.Equal(t, 1, f.gets())
	// A view older than what the lock last read is not used either.
	_, _, err = f.lock.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, f.gets(), "the view (8) is behind the lock's read (9)")
}

func TestWatchedLockReadsTheAPIServerBeforeTheFirstList(t *testing.T) {
	f := newWatchedFixture(lease("other", "4"))
	f.synced = false
	rec, _, err := f.lock.Get(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "other", rec.HolderIdentity)
	assert.Equal(t, 1, f.gets())
}

// bld-optimistic's lock names, on every renewal, the revision of the
// write that made it the holder; an acquisition and a release name none.
func TestTrackedLockNamesItsAcquisitionOnRenewal(t *testing.T) {
	ctx := context.Background()
	prior := lease("other", "")
	prior.Annotations = map[string]string{AcquiredAnnotation: "other@2"}
	cs := fake.NewSimpleClientset(prior)
	rv := 10
	cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		rv++ // the fake API server keeps no revisions
		a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).ResourceVersion = fmt.Sprint(rv)
		return false, nil, nil
	})
	l := &trackedLeaseLock{meta: metav1.ObjectMeta{Name: "app", Namespace: "ns"}, client: cs.CoordinationV1(), identity: "me", node: "w1"}
	stored := func() map[string]string {
		got, err := cs.CoordinationV1().Leases("ns").Get(ctx, "app", metav1.GetOptions{})
		require.NoError(t, err)
		return got.Annotations
	}
	_, _, err := l.Get(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})) // acquires: 11
	assert.NotContains(t, stored(), AcquiredAnnotation, "the acquisition's own revision dates it")
	assert.Equal(t, "w1", stored()[LeaderNodeAnnotation])
	require.NoError(t, l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})) // renews: 12
	assert.Equal(t, "me@11", stored()[AcquiredAnnotation])
	require.NoError(t, l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})) // renews: 13
	assert.Equal(t, "me@11", stored()[AcquiredAnnotation], "still the acquisition's")
	require.NoError(t, l.Update(ctx, resourcelock.LeaderElectionRecord{})) // releases: 14
	assert.NotContains(t, stored(), AcquiredAnnotation)
	require.NoError(t, l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})) // acquires again: 15
	assert.NotContains(t, stored(), AcquiredAnnotation, "not the earlier term's")
	require.NoError(t, l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"})) // renews: 16
	assert.Equal(t, "me@15", stored()[AcquiredAnnotation])
}
