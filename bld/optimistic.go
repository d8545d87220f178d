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

// viewAhead waits for the view's first lists, and meanwhile lists the
// worker nodes that BLD's condition needs on a crowded node, so that the
// gate costs no round trip.
func (c *Candidate) viewAhead(ctx context.Context) {
	nodes := make(chan struct{})
	go func() {
		defer close(nodes)
		if _, err := c.workerNodes(ctx); err != nil {
			c.cfg.Log.Debug("listing the worker nodes ahead", "err", err) // the gate lists them again, and reports
		}
	}()
	c.view.waitSynced(ctx)
	<-nodes
}

// optimisticGate lets this candidate write the Lease when it is its turn
// (view.turn) and its node meets BLD's condition on the placement as
// watched. Validation checks the condition again, exactly, after the write.
func (c *Candidate) optimisticGate(ctx context.Context, _ *resourcelock.LeaderElectionRecord, _ time.Duration) (bool, error) {
	if !c.view.turn(0) {
		return false, nil
	}
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
