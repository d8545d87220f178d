package cle

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/api/coordination/v1alpha2"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	return c.unregistered(el)
}

// unregistered returns the Pods of el's election that are bound to a
// node and have not registered a candidate, as candidates asked and not
// yet answered (strategy.Candidate.Pending).
func (c *Controller) unregistered(el *election) []strategy.Candidate {
	registered := map[string]bool{}
	for _, lc := range el.candidates {
		registered[lc.Name] = true
	}
	objs, _ := c.pods.ByIndex(byElection, el.lease.Namespace+"/"+el.lease.Name)
	var out []strategy.Candidate
	for _, obj := range objs {
		p, ok := obj.(*v1.Pod)
		if !ok || registered[p.Name] {
			continue
		}
		if node, ok := boundNode(p); ok && node != "" {
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

// A new application whose Pods carry the strategy (bld.StrategyAnnotation)
// and its candidates' lease duration (bld.LeaseDurationAnnotation) is
// decided before any of its candidates starts: its Pods are bound to
// nodes first, so the controller names the holder from them and creates
// the Lease in its name, and the candidate it names finds itself leading
// on its first read. The elections whose candidates register first go
// as before (their candidates create the Lease).

// absent adds to out, per namespace and election, what the strategy's
// Pods tell beyond the LeaseCandidates: an election with no Lease yet
// (absent: its Pods as candidates, a template of its Lease to create),
// and one whose Lease exists but whose candidates have not registered
// yet (so that its holder counts at its Pod's node).
func (c *Controller) absent(out map[string]map[string]*election, seen map[string]bool) {
	for _, obj := range c.pods.List() {
		p, ok := obj.(*v1.Pod)
		if !ok || p.Annotations[bld.StrategyAnnotation] != strategy.Name {
			continue
		}
		name, dur, err := podElection(p)
		if err != nil {
			if key := "pod " + p.Namespace + "/" + p.Name; !c.warned[key] {
				c.warned[key] = true
				c.cfg.Log.Warn("no first holder is named from this Pod", "pod", p.Namespace+"/"+p.Name, "err", err)
			}
			continue
		}
		node, ok := boundNode(p)
		if !ok || node == "" {
			continue
		}
		key := p.Namespace + "/" + name
		if out[p.Namespace][name] != nil && out[p.Namespace][name].pods == nil {
			continue // its candidates have registered
		}
		if out[p.Namespace] == nil {
			out[p.Namespace] = map[string]*election{}
		}
		if l, ok := c.lease(key); ok {
			seen[key] = true
			if l.Spec.Strategy != nil && *l.Spec.Strategy == strategy.Name {
				out[p.Namespace][name] = &election{lease: l}
			}
			continue
		}
		el := out[p.Namespace][name]
		if el == nil {
			secs := int32((dur + time.Second - 1) / time.Second)
			st := coordinationv1.CoordinatedLeaseStrategy(strategy.Name)
			el = &election{lease: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Namespace},
				Spec: coordinationv1.LeaseSpec{Strategy: &st, LeaseDurationSeconds: &secs}}}
			out[p.Namespace][name] = el
		}
		el.pods = append(el.pods, p)
	}
}

// podElection reads a strategy Pod's election and lease duration.
func podElection(p *v1.Pod) (string, time.Duration, error) {
	name := p.Labels[bld.ElectionLabel]
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", 0, fmt.Errorf("label %s: %s", bld.ElectionLabel, errs[0])
	}
	raw := p.Annotations[bld.LeaseDurationAnnotation]
	d, err := time.ParseDuration(raw)
	if err != nil || d < time.Second || d > bld.MaxLease {
		if len(raw) > 64 { // anyone's who creates Pods, and logged
			raw = raw[:64] + "…"
		}
		return "", 0, fmt.Errorf("annotation %s: %q is not a duration from 1s to %s", bld.LeaseDurationAnnotation, raw, bld.MaxLease)
	}
	return name, d, nil
}

// boundNode is the node a live Pod is bound to ("" not yet); false for a
// Pod that is going or gone, or whose node name is unusable.
func boundNode(p *v1.Pod) (string, bool) {
	if p.DeletionTimestamp != nil || ended(p) {
		return "", false
	}
	// The node name is the API server's to check, but a Pod created under
	// a relaxed validation must not reach the counts.
	node := p.Spec.NodeName
	return node, node == "" || len(validation.IsDNS1123Subdomain(node)) == 0
}

// candidateNode is where a registered candidate runs. Its annotation
// (bld.NodeAnnotation) is its own word; its Pod — a LeaseCandidate is named
// after its Pod, and the admission policy lets a candidate write no other —
// is bound by the scheduler. Where the controller sees that Pod bound, its
// node counts, so a candidate misconfigured (or lying) about its node
// cannot move the counts; a disagreement is logged once. Without a Pod (a
// candidate outside the election's Pods) the annotation is all there is.
func (c *Controller) candidateNode(lc *v1alpha2.LeaseCandidate) string {
	claimed := lc.Annotations[bld.NodeAnnotation]
	obj, ok, _ := c.pods.GetByKey(lc.Namespace + "/" + lc.Name)
	if !ok {
		return claimed
	}
	p, ok := obj.(*v1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return claimed
	}
	if node := p.Spec.NodeName; node != claimed {
		if key := "node " + lc.Namespace + "/" + lc.Name; !c.warned[key] {
			c.warned[key] = true
			c.cfg.Log.Warn("candidate counted at its Pod's node, not the one it annotates", "candidate", lc.Namespace+"/"+lc.Name,
				// A node name is at most 253 bytes; the annotation, a
				// candidate's to write, may be far longer.
				"annotation", bld.NodeAnnotation, "annotated", claimed[:min(len(claimed), 253)], "pod_node", node)
		}
		return node
	}
	return claimed
}

// podLeaving reports whether lc's Pod is being deleted (a drained node, a
// rollout): the candidate is on its way out, and the strategy names it
// nothing (strategy.Candidate.Leaving).
func (c *Controller) podLeaving(lc *v1alpha2.LeaseCandidate) bool {
	obj, ok, _ := c.pods.GetByKey(lc.Namespace + "/" + lc.Name)
	p, _ := obj.(*v1.Pod)
	return ok && p != nil && p.DeletionTimestamp != nil
}

// absentElection is an election with no Lease yet, its Pods as its
// candidates; it waits up to an ack wait from when this replica first
// saw it (seen) for a Pod on the emptiest node. Not from its first Pod's
// creationTimestamp: that is in whole seconds, so the wait would end
// anywhere from at once to an ack wait after the Pod came, and an
// application whose Pods were still being created (one by one, on a
// loaded machine) was named from the first of them — on a fuller node,
// a move to undo (seen: TestKubeExperimentsWriteCSVAndReport with two
// busy loops beside it, 2:1:0 leaders for three applications).
func (c *Controller) absentElection(seen time.Time, name string, el *election, soon func(time.Time)) strategy.Election {
	e := strategy.Election{Name: name, Absent: true, LeaseDuration: leaseDuration(el.lease), Gather: seen.Add(c.cfg.AckWait)}
	for _, p := range el.pods {
		e.Candidates = append(e.Candidates, strategy.Candidate{Identity: p.Name, Node: p.Spec.NodeName, Pending: true})
	}
	soon(e.Gather)
	return e
}
