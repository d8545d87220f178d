package bld

import (
	"context"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// The term of a leader is the lock record's leaderTransitions while it
// holds the lock: every acquisition by a candidate that did not hold it
// adds one, in an update the API server accepts only on the
// resourceVersion it was read at, so two tenures never share a term and a
// later tenure always has a larger one. The application uses it as a
// fencing token (leaderapp.Fence). It does not survive the lock object's
// deletion: a re-created Lease starts again at 0.

// termLock notes the holder and leaderTransitions of every record this
// candidate reads or writes successfully.
type termLock struct {
	annotatedLock
	note func(holder string, transitions int)
}

func (l termLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.annotatedLock.Get(ctx)
	if err == nil && rec != nil {
		l.note(rec.HolderIdentity, rec.LeaderTransitions)
	}
	return rec, raw, err
}

func (l termLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.annotatedLock.Create(ctx, rec)
	if err == nil {
		l.note(rec.HolderIdentity, rec.LeaderTransitions)
	}
	return err
}

func (l termLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.annotatedLock.Update(ctx, rec)
	if err == nil {
		l.note(rec.HolderIdentity, rec.LeaderTransitions)
	}
	return err
}

func (c *Candidate) noteRecord(holder string, transitions int) {
	c.mu.Lock()
	c.recHolder, c.recTerm = holder, transitions
	c.mu.Unlock()
}

// LeaderTerm returns the last known leader and its term; ok is false when
// the last record this candidate saw names someone else (the term of the
// leader it names is then unknown).
func (c *Candidate) LeaderTerm() (leader string, term int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader, c.recTerm, c.leader != "" && c.recHolder == c.leader
}
