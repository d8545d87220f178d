// Package strategy is the choice the ringside.io/balanced coordinated
// leader-election strategy makes (KEP-4355: a Lease whose strategy names
// a domain is left to a third-party controller, which sets its holder):
// BLD's rule with the whole picture. A pure function of the elections —
// each Lease and its live LeaseCandidates — and the time: the holder to
// name for a Lease that has none, and the leaders to move back into
// balance. The controller that watches the API server and writes the
// decisions is a shell around it.
package strategy

import (
	"cmp"
	"slices"
	"time"
)

// Name is the strategy, as it appears in a Lease's spec.strategy.
const Name = "ringside.io/balanced"

// Candidate is a LeaseCandidate not known to be dead: who, and on which
// node. Pending marks one asked whether it is still there (a ping) and
// not answered yet (Liveness): it may lead later, it is not named now.
// Leaving marks one whose Pod is being deleted (a drain, a rollout): it
// counts where it leads until it steps down, but is never named holder
// nor a move's target — a leader moved onto a node being drained would
// only have to move again.
type Candidate struct {
	Identity, Node string
	Pending        bool
	Leaving        bool
}

// Election is one application's Lease and its live candidates.
type Election struct {
	Name string
	// Holder is spec.holderIdentity ("" none), renewed at RenewTime for
	// LeaseDuration.
	Holder        string
	RenewTime     time.Time
	LeaseDuration time.Duration
	// Preferred is spec.preferredHolder: a move under way.
	Preferred  string
	Candidates []Candidate
	// LastMove is when this strategy last set Preferred.
	LastMove time.Time
	// Absent: the election has no Lease yet. Its candidates are its
	// Pods, none of them registered (all Pending), and naming one
	// creates the Lease with it as holder — before any candidate starts,
	// as a Pod is bound to its node before its containers start, so the
	// first candidate to look finds its election decided.
	Absent bool
	// Gather: until then a free Lease waits for a candidate on a node
	// with the fewest leaders (of any node hosting a candidate), rather
	// than settle for a fuller one — candidates of a new application
	// register one by one, and naming the first to come would have to be
	// undone by a move.
	Gather time.Time
}

// Decision is what to write to one Lease: a holder for a free Lease, or
// a preferred holder (the holder steps down, the preferred candidate
// takes over).
type Decision struct {
	Election  string
	Holder    string
	Preferred string
}

// Free reports whether nobody holds e's Lease at now: no holder, or one
// whose lease ran out. Naming a holder for a Lease still held would make
// two leaders.
func (e Election) Free(now time.Time) bool {
	return e.Holder == "" || !now.Before(e.RenewTime.Add(e.LeaseDuration))
}

func (e Election) candidate(id string) (Candidate, bool) {
	for _, c := range e.Candidates {
		if c.Identity == id {
			return c, true
		}
	}
	return Candidate{}, false
}

// Decide returns the writes that keep every election led and the leaders
// spread evenly, in a fixed order for fixed input:
//
//   - a free Lease with a live candidate (an absent one: with a Pod) gets
//     the candidate a move chose
//     (preferredHolder) once it answers, or else the one on the node with
//     the fewest leaders among the nodes hosting one (ties: node, then
//     identity, by name) — so no election starves. While a pending
//     candidate sits on a node with fewer leaders than that, the Lease
//     waits for its answer, and until Gather for a candidate on a node
//     with the fewest leaders of all;
//   - while the leader counts of the nodes hosting candidates differ by
//     more than one, a leader on the fullest node whose election has a
//     candidate on the emptiest is moved there (preferredHolder) — at
//     most one move per election per lease duration, none while one is
//     under way or the Lease is free, each move taking the fullest node
//     down by one: ⌈excess⌉ moves, the fewest that balance.
//
// A leader whose candidate is gone but whose Lease is still valid keeps
// leading and counts where its node was last seen (it is not counted if
// that is unknown): the Lease, not the candidate list, says who leads.
func Decide(now time.Time, elections []Election) []Decision {
	es := slices.Clone(elections)
	slices.SortFunc(es, func(a, b Election) int { return cmp.Compare(a.Name, b.Name) })
	// Where each election's leader is (or is about to be), and how many
	// leaders every node hosting a candidate has.
	count := map[string]int{}
	leaderNode := map[string]string{}
	for _, e := range es {
		for _, c := range e.Candidates {
			count[c.Node] += 0
		}
	}
	// A move's target counts where it is going from the moment it is
	// marked, through the free Lease between the two holders.
	for _, e := range es {
		id := e.Holder
		if e.Preferred != "" {
			id = e.Preferred
		} else if e.Free(now) {
			continue
		}
		if c, ok := e.candidate(id); ok {
			count[c.Node]++
			leaderNode[e.Name] = c.Node
		}
	}
	var out []Decision
	for _, e := range es {
		if !e.Free(now) || len(e.Candidates) == 0 {
			continue
		}
		best, ok := e.choose(now, count)
		if !ok {
			continue
		}
		if _, reserved := leaderNode[e.Name]; !reserved {
			count[best.Node]++
			leaderNode[e.Name] = best.Node
		}
		out = append(out, Decision{Election: e.Name, Holder: best.Identity})
	}
	moved := map[string]bool{}
	for {
		full, empty := extremes(count)
		if full == nil || count[full[0]]-count[empty] <= 1 {
			return out
		}
		d, ok := Decision{}, false
		for _, n := range full {
			if d, ok = move(now, es, leaderNode, moved, n, count); ok {
				break
			}
		}
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

// choose picks the holder of free Lease e given the leaders per node, or
// reports that e must wait: no live candidate, a move's target that has
// not answered yet, a pending one on a node
// with fewer leaders than the best live one, or the best live one on a
// node fuller than the emptiest before Gather.
func (e Election) choose(now time.Time, count map[string]int) (Candidate, bool) {
	var live, pending []Candidate
	for _, c := range e.Candidates {
		if c.Leaving {
			continue
		}
		if c.Pending {
			pending = append(pending, c)
		} else {
			live = append(live, c)
		}
	}
	if e.Absent {
		// Nobody can answer a ping before the Lease exists (v1.32 refuses
		// a LeaseCandidate without it): the Pods are all there is.
		live, pending = append(live, pending...), nil
	}
	if len(live) == 0 {
		return Candidate{}, false
	}
	// A move's target, once it answers (until then the Lease waits; if it
	// does not, it is dropped as dead and the Lease goes to the best).
	if c, ok := e.candidate(e.Preferred); ok && !c.Leaving {
		return c, !c.Pending
	}
	best := slices.MinFunc(live, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(count[a.Node], count[b.Node]), cmp.Compare(a.Node, b.Node), cmp.Compare(a.Identity, b.Identity))
	})
	for _, c := range pending {
		if count[c.Node] < count[best.Node] {
			return Candidate{}, false
		}
	}
	if now.Before(e.Gather) {
		if _, emptiest := extremes(count); count[best.Node] > count[emptiest] {
			return Candidate{}, false
		}
	}
	return best, true
}

// extremes returns the nodes with the most leaders, by name, and one
// with the fewest (nil and "" without nodes).
func extremes(count map[string]int) (full []string, empty string) {
	nodes := make([]string, 0, len(count))
	for n := range count {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		switch {
		case full == nil || count[n] > count[full[0]]:
			full = []string{n}
		case count[n] == count[full[0]]:
			full = append(full, n)
		}
		if empty == "" || count[n] < count[empty] {
			empty = n
		}
	}
	return full, empty
}

// move picks a leader on node full to move to the emptiest node its
// election has a live candidate on, if that takes the spread down, and
// records it in leaderNode and count.
func move(now time.Time, es []Election, leaderNode map[string]string, moved map[string]bool, full string, count map[string]int) (Decision, bool) {
	for _, e := range es {
		if leaderNode[e.Name] != full || moved[e.Name] || e.Preferred != "" || e.Free(now) || now.Sub(e.LastMove) < e.LeaseDuration {
			continue
		}
		var to Candidate
		for _, c := range e.Candidates {
			if !c.Pending && !c.Leaving && count[c.Node] < count[full]-1 && (to.Node == "" || count[c.Node] < count[to.Node] ||
				count[c.Node] == count[to.Node] && cmp.Or(cmp.Compare(c.Node, to.Node), cmp.Compare(c.Identity, to.Identity)) < 0) {
				to = c
			}
		}
		if to.Node == "" {
			continue
		}
		count[full]--
		count[to.Node]++
		leaderNode[e.Name] = to.Node
		moved[e.Name] = true
		return Decision{Election: e.Name, Preferred: to.Identity}, true
	}
	return Decision{}, false
}
