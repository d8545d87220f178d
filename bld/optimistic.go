package bld

import (
	"context"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/ringside/ringside/bld/balance"
)

// bld-optimistic's hooks into the elector (see view.go for the design):
// a gate that costs no round trip, and a validation that waits for the
// candidate's own write to come back on the watch.

// sharesRecord reports whether the algorithm keeps leader locations in
// the shared record (the ConfigMap): the BLD family but bld-optimistic,
// whose record is the namespace's Leases.
func (c *Candidate) sharesRecord() bool {
	return balance.Balanced(c.cfg.Algorithm) && c.cfg.Algorithm != balance.BLDOptimistic
}

// optimisticGate lets this candidate write the Lease when its node meets
// BLD's condition on the Leases as watched, which costs no round trip.
// Validation checks the condition again, exactly, after the write.
func (c *Candidate) optimisticGate(ctx context.Context, _ *resourcelock.LeaderElectionRecord, _ time.Duration) (bool, error) {
	p, seen := c.view.placementSeen()
	ok, err := c.qualifies(ctx, p)
	c.view.gated(ok && err == nil, seen)
	return ok, err
}

// validateInOrder is BLD's condition on the leaders of the elections
// whose writes the API server committed before this candidate's.
func (c *Candidate) validateInOrder(ctx context.Context, _ string) (bool, error) {
	p, err := c.view.placementAt(ctx, c.nodeLock.lastWrite(), c.cfg.RenewDeadline)
	if err != nil {
		return false, err
	}
	return c.qualifies(ctx, p)
}

// countWorkers lists the worker nodes once the view needs N to judge a
// Lease (its watch waits meanwhile). A failed list is tried again, at
// most every retry period.
func (c *Candidate) countWorkers(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-c.view.need:
	case <-c.view.ready: // the gate listed them
		return
	}
	wait := c.cfg.RetryPeriod / 40
	for {
		_, err := c.workerNodes(ctx) // which gives the view N
		if err == nil {
			return
		}
		c.cfg.Log.Warn("bld-optimistic: listing the worker nodes failed", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-c.cfg.Clock.After(wait):
		}
		wait = min(2*wait, c.cfg.RetryPeriod)
	}
}
