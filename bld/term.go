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
// candidate reads or writes successfully, and whether it wrote it.
//
// Before a write that names another holder or none (a release, a
// hand-over) it calls yield with that holder, which ends this candidate's
// leadership.
type termLock struct {
	annotatedLock
	note  func(holder string, transitions int, wrote bool)
	yield func(to string)
}

func (l termLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.annotatedLock.Get(ctx)
	if err == nil && rec != nil {
		l.note(rec.HolderIdentity, rec.LeaderTransitions, false)
	}
	return rec, raw, err
}

func (l termLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.annotatedLock.Create(ctx, rec)
	if err == nil {
		l.note(rec.HolderIdentity, rec.LeaderTransitions, true)
	}
	return err
}

func (l termLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if rec.HolderIdentity != l.Identity() {
		l.yield(rec.HolderIdentity)
	}
	err := l.annotatedLock.Update(ctx, rec)
	if err == nil {
		l.note(rec.HolderIdentity, rec.LeaderTransitions, true)
	}
	return err
}

func (c *Candidate) noteRecord(holder string, transitions int, wrote bool) {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	c.recHolder, c.recTerm, c.recSeen = holder, transitions, true
	if wrote && holder == c.cfg.Identity {
		c.renewedAt = now
	}
	c.mu.Unlock()
}

// LeaderTerm returns the leader as this candidate knows it and, when
// known, its term. The freshest knowledge wins: the last lock record read
// or written, at every try, over the electors' callbacks — client-go
// reports a new leader only at the end of a renew round, so a leader
// woken from a pause would name itself for a whole renew deadline after
// its first read showed another holder. A candidate that stepped down
// does not name itself although its last record does: cut off from the
// API server, it could read no newer one. Nor does a leader whose last
// renewal is a renew deadline old by its clock, whatever its elector
// still believes (a request hung in a partition can hold client-go's
// elector, and its callbacks, well past it). A released lease names
// nobody.
func (c *Candidate) LeaderTerm() (leader string, term int, ok bool) {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.recSeen {
		return c.leader, 0, false
	}
	if c.recHolder == c.cfg.Identity && (!c.leading || now.Sub(c.renewedAt) >= c.cfg.RenewDeadline) {
		return "", 0, false
	}
	return c.recHolder, c.recTerm, c.recHolder != ""
}

// endLeadership sends "stopped" once per "started": when the leader
// context ends, or before the write that gives the lease up, whichever
// comes first. The event names to, the candidate this one hands the lead
// to where it gives it up on purpose (a hand-over's write, a move the
// controller ordered), and nobody where it releases the lease or loses it
// (a renewal missed): an experiment tells the moves a strategy made from
// the re-elections a loaded machine causes by it.
func (c *Candidate) endLeadership(to string) {
	c.announceMu.Lock()
	defer c.announceMu.Unlock()
	if c.announced {
		c.announced = false
		c.cfg.OnEvent("stopped", to)
	}
}
