package strategy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var now = time.Unix(10_000, 0)

const lease = 10 * time.Second

func cands(app string, nodes ...string) []Candidate {
	var out []Candidate
	for _, n := range nodes {
		out = append(out, Candidate{Identity: app + "@" + n, Node: n})
	}
	return out
}

func held(name, holder string, c []Candidate) Election {
	return Election{Name: name, Holder: holder, RenewTime: now.Add(-time.Second), LeaseDuration: lease, Candidates: c}
}

// New elections, every one with a candidate on every node: one leader per
// node, in a fixed order.
func TestFreeLeasesAreSpread(t *testing.T) {
	var es []Election
	for _, a := range []string{"c", "a", "b"} {
		es = append(es, Election{Name: a, Candidates: cands(a, "n3", "n1", "n2")})
	}
	assert.Equal(t, []Decision{{Election: "a", Holder: "a@n1"}, {Election: "b", Holder: "b@n2"}, {Election: "c", Holder: "c@n3"}}, Decide(now, es))
}

// BLD's starving case: every node with a candidate of an election already
// leads as much as the rule allows. With the whole picture the election
// still gets a leader, on its least loaded node.
func TestNoElectionStarves(t *testing.T) {
	es := []Election{
		held("a", "a@n1", cands("a", "n1", "n2")),
		held("b", "b@n2", cands("b", "n1", "n2")),
		{Name: "c", Candidates: cands("c", "n1")}, // only n1 hosts c
	}
	assert.Equal(t, []Decision{{Election: "c", Holder: "c@n1"}}, Decide(now, es))
}

// A Lease still valid is never given a second holder, even when its
// holder's candidate is gone; once it runs out it is.
func TestHeldLeaseKeepsItsHolder(t *testing.T) {
	e := held("a", "gone", cands("a", "n1"))
	assert.Empty(t, Decide(now, []Election{e}))
	e.RenewTime = now.Add(-lease)
	assert.Equal(t, []Decision{{Election: "a", Holder: "a@n1"}}, Decide(now, []Election{e}))
}

// A fourth node joins with a candidate of every election: the fewest
// moves balance it, one per election at most, none while one is under
// way or within a lease of the last.
func TestLeadersMoveBackIntoBalance(t *testing.T) {
	var es []Election
	for i, n := range []string{"n1", "n1", "n2", "n2", "n3", "n3"} {
		a := fmt.Sprintf("app%d", i)
		es = append(es, held(a, a+"@"+n, cands(a, "n1", "n2", "n3", "n4")))
	}
	got := Decide(now, es)
	assert.Equal(t, []Decision{{Election: "app0", Preferred: "app0@n4"}}, got, "2:2:2:0 needs one move")

	// 3:3:0 → 2:2:2 takes two.
	es = nil
	for i, n := range []string{"n1", "n1", "n1", "n2", "n2", "n2"} {
		a := fmt.Sprintf("app%d", i)
		es = append(es, held(a, a+"@"+n, cands(a, "n1", "n2", "n3")))
	}
	assert.Equal(t, []Decision{{Election: "app0", Preferred: "app0@n3"}, {Election: "app3", Preferred: "app3@n3"}}, Decide(now, es))

	// The move under way counts where it goes; a recent move waits.
	es[0].Preferred = "app0@n3"
	es[3].LastMove = now.Add(-lease / 2)
	es[4].LastMove = now.Add(-lease / 2)
	es[5].LastMove = now.Add(-lease / 2)
	assert.Empty(t, Decide(now, es), "2:3:1 with n2's elections all moved within a lease")
	es[3].LastMove = now.Add(-lease)
	assert.Equal(t, []Decision{{Election: "app3", Preferred: "app3@n3"}}, Decide(now, es), "a lease later it may move")
}

// On random clusters: every decision is for an election that needs it (a
// holder only for a free Lease, from its live candidates; a move only for
// a held one, to a live candidate), at most one per election, the same
// for any order of the input, and afterwards the spread is at most one
// unless no allowed move could narrow it.
func TestDecideProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	for trial := range 2000 {
		var es []Election
		for i := range 1 + r.IntN(12) {
			name := fmt.Sprintf("e%d", i)
			var cs []Candidate
			for _, n := range nodes[:1+r.IntN(len(nodes))] {
				if r.IntN(3) > 0 {
					cs = append(cs, Candidate{Identity: name + "@" + n, Node: n, Leaving: r.IntN(6) == 0})
				}
			}
			e := Election{Name: name, Candidates: cs, LeaseDuration: lease}
			if len(cs) > 0 && r.IntN(4) > 0 {
				e.Holder, e.RenewTime = cs[r.IntN(len(cs))].Identity, now.Add(-time.Duration(r.IntN(12))*time.Second)
			}
			es = append(es, e)
		}
		got := Decide(now, es)
		shuffled := slices.Clone(es)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		require.Equal(t, got, Decide(now, shuffled), "trial %d: the order of the input decides nothing", trial)

		byName := map[string]Election{}
		for _, e := range es {
			byName[e.Name] = e
		}
		seen := map[string]bool{}
		for _, d := range got {
			e := byName[d.Election]
			require.False(t, seen[d.Election], "trial %d: two decisions for %s", trial, d.Election)
			seen[d.Election] = true
			id := d.Holder + d.Preferred
			c, live := e.candidate(id)
			require.True(t, live, "trial %d: %s names %q, not a live candidate", trial, d.Election, id)
			require.False(t, c.Leaving, "trial %d: %s names %q, whose Pod is being deleted", trial, d.Election, id)
			require.True(t, (d.Holder != "") == e.Free(now), "trial %d: %s: a holder exactly for a free Lease (%+v)", trial, d.Election, d)
		}
		for _, e := range es {
			if e.Free(now) && slices.ContainsFunc(e.Candidates, func(c Candidate) bool { return !c.Leaving }) {
				require.True(t, seen[e.Name], "trial %d: %s starves", trial, e.Name)
			}
		}
		checkBalanced(t, trial, es, got)
	}
}

// checkBalanced applies the decisions and checks that the leaders are
// spread within one, or that no election led on a fullest node could
// move to a node two or more below it.
func checkBalanced(t *testing.T, trial int, es []Election, ds []Decision) {
	t.Helper()
	after := map[string]string{} // election → the identity leading after the decisions
	for _, e := range es {
		if !e.Free(now) {
			after[e.Name] = e.Holder
		}
	}
	for _, d := range ds {
		after[d.Election] = d.Holder + d.Preferred
	}
	count := map[string]int{}
	where := map[string]string{}
	for _, e := range es {
		for _, c := range e.Candidates {
			count[c.Node] += 0
			if c.Identity == after[e.Name] {
				count[c.Node]++
				where[e.Name] = c.Node
			}
		}
	}
	hi, lo := -1, 1<<30
	for _, n := range count {
		hi, lo = max(hi, n), min(lo, n)
	}
	if hi-lo <= 1 {
		return
	}
	moved := map[string]bool{}
	for _, d := range ds {
		moved[d.Election] = d.Preferred != ""
	}
	for _, e := range es {
		if count[where[e.Name]] != hi || moved[e.Name] || e.Free(now) {
			continue
		}
		for _, c := range e.Candidates {
			require.False(t, !c.Leaving && count[c.Node] < hi-1, "trial %d: spread %d–%d, yet %s could move to %s", trial, lo, hi, e.Name, c.Node)
		}
	}
}

// A pending candidate (pinged, not answered) is never named; a free Lease
// waits for it only while it sits on a node with fewer leaders than the
// best live candidate's.
func TestPendingCandidatesWaitOnlyWhereTheyCouldWin(t *testing.T) {
	busy := held("b", "b@n1", cands("b", "n1"))
	e := Election{Name: "a", Candidates: []Candidate{{Identity: "a@n1", Node: "n1"}, {Identity: "a@n2", Node: "n2", Pending: true}}}
	assert.Empty(t, Decide(now, []Election{busy, e}), "n2 (no leader) may answer: wait")
	e.Candidates[1].Node, e.Candidates[1].Identity = "n1", "a@n1b"
	assert.Equal(t, []Decision{{Election: "a", Holder: "a@n1"}}, Decide(now, []Election{busy, e}), "nothing better can answer")
	e.Candidates = []Candidate{{Identity: "a@n2", Node: "n2", Pending: true}}
	assert.Empty(t, Decide(now, []Election{e}), "no live candidate")
	// Nor does a move go to a pending candidate.
	es := []Election{held("x", "x@n1", cands("x", "n1")), held("y", "y@n1", cands("y", "n1")),
		held("z", "z@n1", []Candidate{{Identity: "z@n1", Node: "n1"}, {Identity: "z@n2", Node: "n2", Pending: true}})}
	assert.Empty(t, Decide(now, es))
}

// A free Lease goes to the candidate a move chose, when it is live,
// whatever the counts say now.
func TestAFreeLeaseGoesToItsPreferredHolder(t *testing.T) {
	e := Election{Name: "a", Preferred: "a@n3", Candidates: cands("a", "n1", "n2", "n3")}
	busy := held("b", "b@n3", cands("b", "n3"))
	assert.Equal(t, []Decision{{Election: "a", Holder: "a@n3"}}, Decide(now, []Election{busy, e}))
	e.Candidates[2].Pending = true
	assert.Empty(t, Decide(now, []Election{busy, e}), "it is asked: wait for its answer")
	e.Candidates = e.Candidates[:2] // it did not answer
	assert.Equal(t, []Decision{{Election: "a", Holder: "a@n1"}}, Decide(now, []Election{busy, e}))
}

// Between the holders of a move the Lease is free; the target's node
// counts its leader all along, so no second move answers the first.
func TestAMoveUnderWayCountsAtItsTarget(t *testing.T) {
	es := []Election{
		held("b", "b@n1", cands("b", "n1", "n4")),
		held("c", "c@n1", cands("c", "n1", "n4")),
		held("d", "d@n2", cands("d", "n2", "n4")),
		held("e", "e@n3", cands("e", "n3", "n4")),
		{Name: "a", Holder: "a@n2", RenewTime: now.Add(-lease), LeaseDuration: lease, Preferred: "a@n4",
			Candidates: []Candidate{{Identity: "a@n2", Node: "n2"}, {Identity: "a@n4", Node: "n4", Pending: true}}},
	}
	assert.Empty(t, Decide(now, es), "2:1:1:(1 coming): nothing to do")
}

func TestLiveness(t *testing.T) {
	const wait = time.Second
	since := now.Add(-time.Minute)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	for _, c := range []struct {
		name        string
		renew, ping time.Time
		want        Status
	}{
		{"renewed since the Lease went free", at(-time.Second), time.Time{}, Live},
		{"renewed just before the Lease went free (registered beside its creation)", since.Add(-wait), time.Time{}, Live},
		{"renewed a wait and more before", since.Add(-wait - time.Millisecond), time.Time{}, Unasked},
		{"renewed before, never pinged", at(-2 * time.Minute), time.Time{}, Unasked},
		{"answered an old ping, then the Lease went free", at(-2 * time.Minute), at(-3 * time.Minute), Unasked},
		{"pinged just now", at(-2 * time.Minute), at(-wait / 2), Pending},
		{"pinged and silent past the wait", at(-2 * time.Minute), at(-wait), Dead},
		{"answered its ping", at(-time.Millisecond), at(-wait / 2), Live},
	} {
		assert.Equal(t, c.want, Liveness(now, since, c.renew, c.ping, wait), c.name)
	}
	// A Lease still held: never asked, alive unless silent to a ping.
	assert.Equal(t, Live, Liveness(now, time.Time{}, at(-time.Hour), time.Time{}, wait))
	assert.Equal(t, Dead, Liveness(now, time.Time{}, at(-time.Hour), at(-time.Minute), wait))
}

// Until Gather, a free Lease waits for a candidate on an emptiest node
// rather than take one on a fuller node; after it, it takes the best.
func TestAFreeLeaseGathersCandidates(t *testing.T) {
	busy := held("b", "b@n1", cands("b", "n1"))
	other := held("c", "c@n3", cands("c", "n3", "n2"))
	e := Election{Name: "a", Candidates: cands("a", "n1"), Gather: now.Add(time.Second)}
	assert.Empty(t, Decide(now, []Election{busy, other, e}), "n2 has no leader: wait for a's candidate there")
	e.Gather = now
	assert.Equal(t, []Decision{{Election: "a", Holder: "a@n1"}}, Decide(now, []Election{busy, other, e}))
	e.Gather = now.Add(time.Second)
	e.Candidates = append(e.Candidates, Candidate{Identity: "a@n2", Node: "n2"})
	assert.Equal(t, []Decision{{Election: "a", Holder: "a@n2"}}, Decide(now, []Election{busy, other, e}), "one came: no need to wait")
}

// A candidate whose Pod is being deleted (a node drained) is neither
// named holder nor made a move's target, yet counts where it leads.
func TestLeavingCandidatesAreNeverChosen(t *testing.T) {
	leaving := func(cs []Candidate, node string) []Candidate {
		for i := range cs {
			cs[i].Leaving = cs[i].Node == node
		}
		return cs
	}
	// n3 is being drained, and holds no leader: a's free Lease goes to
	// n1, as full as n2 and before it by name.
	es := []Election{
		{Name: "a", Candidates: leaving(cands("a", "n1", "n2", "n3"), "n3")},
		held("b", "b@n1", leaving(cands("b", "n1", "n3"), "n3")),
		held("c", "c@n2", cands("c", "n1", "n2")),
	}
	assert.Equal(t, []Decision{{Election: "a", Holder: "a@n1"}}, Decide(now, es))
	// n1 holds two leaders and the drained n3 none: no move goes there.
	es = []Election{
		held("a", "a@n1", leaving(cands("a", "n1", "n3"), "n3")),
		held("b", "b@n1", leaving(cands("b", "n1", "n3"), "n3")),
		held("c", "c@n2", leaving(cands("c", "n2", "n3"), "n3")),
	}
	assert.Empty(t, Decide(now, es))
	// A move's target whose Pod is being deleted is dropped: the free
	// Lease goes to the best of the others.
	e := Election{Name: "a", Preferred: "a@n3", Candidates: leaving(cands("a", "n1", "n3"), "n3")}
	assert.Equal(t, []Decision{{Election: "a", Holder: "a@n1"}}, Decide(now, []Election{e}))
	// Only leaving candidates: nobody is named.
	e = Election{Name: "a", Candidates: leaving(cands("a", "n3"), "n3")}
	assert.Empty(t, Decide(now, []Election{e}))
}

func pods(app string, nodes ...string) []Candidate {
	out := cands(app, nodes...)
	for i := range out {
		out[i].Pending = true
	}
	return out
}

// An election with no Lease yet is named from its Pods, none of which has
// registered: balanced with the others as a free Lease would be, counting
// a named holder whose Pod has not registered at its node, and waiting
// until Gather for a Pod on the emptiest node.
func TestAnAbsentElectionIsNamedFromItsPods(t *testing.T) {
	es := []Election{
		held("a", "a@n1", pods("a", "n1", "n2", "n3")), // named, not registered yet
		{Name: "b", Absent: true, Candidates: pods("b", "n1", "n2", "n3")},
		{Name: "c", Absent: true, Candidates: pods("c", "n3", "n1")},
	}
	assert.Equal(t, []Decision{{Election: "b", Holder: "b@n2"}, {Election: "c", Holder: "c@n3"}}, Decide(now, es))

	// Only a Pod on a fuller node so far: it waits for one on the
	// emptiest until Gather, then takes the best it has.
	es = []Election{held("a", "a@n1", pods("a", "n1", "n2")), {Name: "b", Absent: true, Candidates: pods("b", "n1"), Gather: now.Add(time.Second)}}
	require.Empty(t, Decide(now, es))
	assert.Equal(t, []Decision{{Election: "b", Holder: "b@n1"}}, Decide(now.Add(time.Second), es))

	// Without Absent, Pods alone (Pending) name nobody: the rule for a
	// Lease whose candidates have registered is unchanged.
	es[1].Absent = false
	assert.Empty(t, Decide(now.Add(time.Second), es))
}
