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
	return c.qualifies(ctx, c.view.placement())
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
