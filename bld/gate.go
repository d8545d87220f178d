package bld

import (
	"context"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/ringside/ringside/bld/balance"
)

// The BLD family's gate: the balance condition checked on the leader
// record before an acquisition, the record read ahead beside the lock, and
// the leader's upkeep of its record entry.

// nodesTTL is how long the list of worker nodes is trusted.
const nodesTTL = 30 * time.Second

// Workers names the nodes BLD counts (N): the schedulable ones that are
// not control planes.
func Workers(nodes []v1.Node) []string {
	out := []string{}
	for _, n := range nodes {
		if _, cp := n.Labels["node-role.kubernetes.io/control-plane"]; !cp && !n.Spec.Unschedulable {
			out = append(out, n.Name)
		}
	}
	return out
}

// workerNodes are the Workers, listed at most every nodesTTL.
func (c *Candidate) workerNodes(ctx context.Context) ([]string, error) {
	c.mu.Lock()
	nodes, at := c.nodes, c.nodesAt
	c.mu.Unlock()
	if nodes != nil && c.cfg.Clock.Since(at) < nodesTTL {
		return nodes, nil
	}
	// ResourceVersion "0" lets the API server answer from its watch cache.
	// A consistent list (the default since Kubernetes 1.31) waits for the
	// cache to catch up with etcd, which on a quiet server takes up to the
	// cache's 100 ms progress-notify tick: that wait, not the request, was
	// most of BLD's extra election latency. Nodes change rarely.
	list, err := c.cfg.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	out := Workers(list.Items)
	c.mu.Lock()
	c.nodes, c.nodesAt = out, c.cfg.Clock.Now()
	c.mu.Unlock()
	if c.view != nil {
		c.view.setWorkers(len(out))
	}
	return out, nil
}

// readAhead reads the record while the elector reads the lock (on a
// candidate's first try, before: see unclaimed), so a free lease costs
// BLD one round trip more than the default election (the reservation),
// not two. When the record shows that this candidate's node already
// holds another application's leader, it also lists what the balance
// condition then needs (the worker nodes, or the election's candidates);
// listing them for every candidate instead loads the API server at the
// busiest moment of a burst of elections.
func (c *Candidate) readAhead(ctx context.Context) {
	snap := c.record.Read(ctx)
	c.mu.Lock()
	c.ahead, c.aheadAt = &snap, c.cfg.Clock.Now()
	c.mu.Unlock()
	if p, err := snap.Placement(); err == nil && c.crowded(p) {
		c.balanceInputs(ctx) // an error shows again, and is reported, in qualifies
	}
}

// aheadSnapshot returns the record as read ahead for this try, nil when it was
// read for an earlier one (a compare-and-swap on it would be wasted);
// taking it leaves none, so a retry reads afresh.
func (c *Candidate) aheadSnapshot(take bool) *Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	ahead := c.ahead
	if c.cfg.Clock.Since(c.aheadAt) > time.Second {
		ahead = nil
	}
	if take {
		c.ahead = nil
	}
	return ahead
}

// unclaimed reports whether the record, as read ahead, holds no entry
// for this election: nobody leads it or is reserving it, so its lock is
// most likely absent.
func (c *Candidate) unclaimed() bool {
	c.mu.Lock()
	ahead := c.ahead
	c.mu.Unlock()
	if ahead == nil {
		return false
	}
	p, err := ahead.Placement()
	_, claimed := p[c.cfg.Election]
	return err == nil && !claimed
}

// peers are the live candidate Pods of this election, listed at most
// every retry period.
func (c *Candidate) peers(ctx context.Context) ([]v1.Pod, error) {
	c.mu.Lock()
	pods, at := c.pods, c.podsAt
	c.mu.Unlock()
	if pods != nil && c.cfg.Clock.Since(at) < c.cfg.RetryPeriod {
		return pods, nil
	}
	// A consistent list, unlike the nodes': candidates start moments after
	// their Pods are created, and a peer missing from a lagging cache
	// would let bld-plus pass over the least-loaded candidate node.
	list, err := c.cfg.Client.CoreV1().Pods(c.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: ElectionLabel + "=" + c.cfg.Election})
	if err != nil {
		return nil, err
	}
	pods = slices.DeleteFunc(list.Items, func(p v1.Pod) bool { return p.DeletionTimestamp != nil })
	c.mu.Lock()
	c.pods, c.podsAt = pods, c.cfg.Clock.Now()
	c.mu.Unlock()
	return pods, nil
}

func (c *Candidate) balanceGate(ctx context.Context, observed *resourcelock.LeaderElectionRecord, _ time.Duration) (bool, error) {
	previous := ""
	if observed != nil {
		previous = observed.HolderIdentity
	}
	return c.reserve(ctx, previous)
}

// reserve reserves this node for the election in the record, under the
// balance condition, in a compare-and-swap on the record as read ahead
// (read again on a conflict), before the lease is written.
func (c *Candidate) reserve(ctx context.Context, previous string) (bool, error) {
	return c.record.Reserve(ctx, c.aheadSnapshot(true), c.cfg.Election, c.cfg.Identity, c.cfg.Node, previous, c.cfg.LeaseDuration, func(p balance.Placement) (bool, error) {
		return c.qualifies(ctx, p)
	})
}

// qualifies evaluates the balance condition on p. A node that holds no
// other application's leader qualifies under every rule, whatever the
// worker nodes (bld, bld-literal) or the election's candidate nodes
// (bld-plus), so those are needed only when this node is crowded.
func (c *Candidate) qualifies(ctx context.Context, p balance.Placement) (bool, error) {
	if !c.crowded(p) {
		return true, nil
	}
	nodes, cands, err := c.balanceInputs(ctx)
	if err != nil {
		return false, err
	}
	return balance.Qualifies(c.cfg.Algorithm, c.cfg.Election, c.cfg.Node, p, nodes, cands), nil
}

// crowded reports whether this candidate's node holds another
// application's leader in p.
func (c *Candidate) crowded(p balance.Placement) bool {
	return p.Counts(c.cfg.Election)[c.cfg.Node] > 0
}

// balanceInputs lists what the balance condition needs beside the
// record: the worker nodes (bld, bld-literal) or the nodes hosting a
// candidate of this election (bld-plus). Both are cached.
func (c *Candidate) balanceInputs(ctx context.Context) (nodes, cands []string, err error) {
	switch c.cfg.Algorithm {
	case balance.BLD, balance.BLDLiteral, balance.BLDOptimistic:
		nodes, err = c.workerNodes(ctx)
	case balance.BLDPlus:
		cands, err = c.candidateNodes(ctx)
	}
	return nodes, cands, err
}

// candidateNodes are the nodes that host a live candidate of this
// election.
func (c *Candidate) candidateNodes(ctx context.Context) ([]string, error) {
	pods, err := c.peers(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods {
		if p.Spec.NodeName != "" && !slices.Contains(out, p.Spec.NodeName) {
			out = append(out, p.Spec.NodeName)
		}
	}
	return out, nil
}

// confirmLoop keeps this leader's entry in the record every retry period
// while it leads: a candidate that took the lease for expired by its own
// clock, reserved, and then lost the lease to this leader's renewal
// drops that reservation, and with it the application's entry.
func (c *Candidate) confirmLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.cfg.Clock.After(c.cfg.RetryPeriod):
		}
		if err := c.record.Confirm(ctx, c.cfg.Election, c.cfg.Identity, c.cfg.Node, c.cfg.LeaseDuration); err != nil && ctx.Err() == nil {
			c.cfg.Log.Warn("confirming the leader record failed", "err", err)
		}
	}
}

func (c *Candidate) afterBalanced(ctx context.Context, won bool) {
	if !won {
		if err := c.record.Release(ctx, c.cfg.Election, c.cfg.Identity); err != nil {
			c.cfg.Log.Debug("dropping the reservation failed", "err", err)
		}
	}
}
