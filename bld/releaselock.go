package bld

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// freshLock retries an Update refused for a stale resourceVersion once,
// after re-reading the lock, when the fresh read shows this candidate still
// holds it.
//
// Why: client-go's elector renews at once after acquiring, and a SIGTERM
// that lands while that renewal is in flight cancels the request after
// the API server applied it. The lock then caches the old object, so the
// release that ReleaseOnCancel writes next conflicts, is dropped ("Failed
// to release lock"), and the followers wait out the whole lease — 4 of 10
// SIGTERMed default leaders in kube-reelection. Re-reading first is what
// client-go's own slow path does for renewals; the holder check keeps it
// from overwriting a lease someone else has taken.
type freshLock struct{ resourcelock.Interface }

func (l freshLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, rec)
	if !apierrors.IsConflict(err) {
		return err
	}
	cur, _, gerr := l.Interface.Get(ctx) // refreshes the cached object
	if gerr != nil || cur.HolderIdentity != l.Identity() {
		return err
	}
	return l.Interface.Update(ctx, rec)
}
