package bld

import (
	"context"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// watchedLock is bld-optimistic's lock: a candidate that does not hold
// the lease reads it from the view's watch, not from the API server.
//
// Why: the elector reads the lock at every try, and a candidate the gate
// refuses tries again at every change of the other leaders that lets it
// pass. On kind (2026-11-30, a slower host) those reads took 10 ms to
// 1.2 s each in a burst of elections, and the winner's last read was on
// its critical path; the watch already holds the Lease, at no cost.
// Safety does not rest on the read: a write is a compare-and-swap on the
// resourceVersion read, so a stale view makes the write fail, not
// succeed. After such a failure the next read goes to the API server.
//
// The holder reads from the API server as before: its renewals are a
// retry period apart, and its own writes may be ahead of the watch.
type watchedLock struct {
	*trackedLeaseLock
	// own is the Lease as the view last saw it (nil: absent), and
	// whether the view has listed yet.
	own func() (*coordinationv1.Lease, bool)
	// distrust: a write failed on what the view showed; the next read
	// asks the API server.
	distrust atomic.Bool
}

func (l *watchedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	lease, ok := l.own()
	if !ok || !l.trust(lease) {
		rec, raw, err := l.trackedLeaseLock.Get(ctx)
		if err == nil || apierrors.IsNotFound(err) {
			l.distrust.Store(false)
		}
		return rec, raw, err
	}
	if lease == nil {
		return nil, nil, apierrors.NewNotFound(coordinationv1.Resource("leases"), l.meta.Name)
	}
	l.adopt(lease)
	return leaseRecord(lease)
}

// trust reports whether the view's copy may stand for a read: no write
// failed on it since the last read from the API server, this candidate
// does not hold the lease as its lock last knew it, and the copy is no
// older than the lock's own (after a write of ours the watch may lag).
func (l *watchedLock) trust(watched *coordinationv1.Lease) bool {
	if l.distrust.Load() {
		return false
	}
	mine := l.base()
	switch {
	case mine == nil:
		return true
	case mine.Spec.HolderIdentity != nil && *mine.Spec.HolderIdentity == l.identity:
		return false
	case watched == nil:
		// Absent now, present when the lock last saw it: deleted since,
		// unless the watch has yet to deliver the Lease the lock saw.
		return false
	}
	return !OlderVersion(watched, mine)
}

func (l *watchedLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.trackedLeaseLock.Create(ctx, rec)
	l.learn(err)
	return err
}

func (l *watchedLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.trackedLeaseLock.Update(ctx, rec)
	l.learn(err)
	return err
}

// learn distrusts the view after a write that lost its compare-and-swap
// (the Lease had changed, or existed), until a read from the API server.
func (l *watchedLock) learn(err error) {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		l.distrust.Store(true)
	}
}
