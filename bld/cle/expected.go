package cle

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ringside/ringside/bld"
	"github.com/ringside/ringside/bld/strategy"
)

// A new application's candidates register one by one, and the
// LeaseCandidates alone cannot tell the controller that a candidate is
// still on its way: if the candidates on one node come up first for
// every application (a loaded node, a container pulled late), each
// election would name one of them, on one node, and the spread would
// wait for moves. Their Pods, though, are bound to nodes before any of
// them starts. So for a Lease never held, a candidate Pod of its
// election without a LeaseCandidate counts as a candidate asked and not
// yet answered (strategy.Candidate.Pending) for Gather after the Lease
// went free: the election waits for it when its node has fewer leaders
// than the best registered candidate's, and only then.

// byElection indexes candidate Pods by namespace and election.
const byElection = "election"

func electionOf(obj any) ([]string, error) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	return []string{p.Namespace + "/" + p.Labels[bld.ElectionLabel]}, nil
}

// expected returns the Pods of el's election that are bound to a node
// and have not registered a candidate, as pending candidates, until
// Gather after since (when its Lease went free).
func (c *Controller) expected(now, since time.Time, el *election) []strategy.Candidate {
	if !now.Before(since.Add(c.cfg.Gather)) {
		return nil
	}
	registered := map[string]bool{}
	for _, lc := range el.candidates {
		registered[lc.Name] = true
	}
	objs, _ := c.pods.ByIndex(byElection, el.lease.Namespace+"/"+el.lease.Name)
	var out []strategy.Candidate
	for _, obj := range objs {
		p, ok := obj.(*v1.Pod)
		if !ok || registered[p.Name] || p.DeletionTimestamp != nil || ended(p) {
			continue
		}
		// The node name is the API server's to check, but a Pod created
		// under a relaxed validation must not reach the counts.
		if node := p.Spec.NodeName; node != "" && len(validation.IsDNS1123Subdomain(node)) == 0 {
			out = append(out, strategy.Candidate{Identity: p.Name, Node: node, Pending: true})
		}
	}
	return out
}

// placementChanged reports whether a Pod update changes what expected
// reads of it: its node, its deletion, its end.
func placementChanged(o, n any) bool {
	a, ok1 := o.(*v1.Pod)
	b, ok2 := n.(*v1.Pod)
	if !ok1 || !ok2 {
		return true
	}
	return a.Spec.NodeName != b.Spec.NodeName || (a.DeletionTimestamp == nil) != (b.DeletionTimestamp == nil) || ended(a) != ended(b)
}

func ended(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}
