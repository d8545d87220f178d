package bld

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// staleLock refuses the first Update as a conflict, as a lock whose cached
// object is older than the API server's does.
type staleLock struct {
	resourcelock.Interface
	holder        string
	updates, gets int
	conflicts     int
	written       []string
}

func (l *staleLock) Identity() string { return "me" }
func (l *staleLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.gets++
	return &resourcelock.LeaderElectionRecord{HolderIdentity: l.holder}, nil, nil
}
func (l *staleLock) Update(_ context.Context, rec resourcelock.LeaderElectionRecord) error {
	l.updates++
	if l.conflicts > 0 {
		l.conflicts--
		return apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "app", errors.New("the object has been modified"))
	}
	l.written = append(l.written, rec.HolderIdentity)
	return nil
}

func TestFreshLockRetriesAStaleReleaseWhileItHolds(t *testing.T) {
	l := &staleLock{holder: "me", conflicts: 1}
	assert.NoError(t, freshLock{l}.Update(context.Background(), resourcelock.LeaderElectionRecord{}))
	assert.Equal(t, 2, l.updates)
	assert.Equal(t, 1, l.gets, "re-read once to refresh the cached object")
	assert.Equal(t, []string{""}, l.written, "the release went through")
}

func TestFreshLockLeavesAnotherHoldersLease(t *testing.T) {
	l := &staleLock{holder: "someone-else", conflicts: 1}
	err := freshLock{l}.Update(context.Background(), resourcelock.LeaderElectionRecord{})
	assert.True(t, apierrors.IsConflict(err))
	assert.Equal(t, 1, l.updates, "no second write over a lease another candidate took")
	assert.Empty(t, l.written)
}

func TestFreshLockRetriesOnce(t *testing.T) {
	l := &staleLock{holder: "me", conflicts: 2}
	err := freshLock{l}.Update(context.Background(), resourcelock.LeaderElectionRecord{})
	assert.True(t, apierrors.IsConflict(err))
	assert.Equal(t, 2, l.updates)
	// Other errors pass through untouched.
	l = &staleLock{holder: "me"}
	assert.NoError(t, freshLock{l}.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}))
	assert.Equal(t, 0, l.gets)
}
