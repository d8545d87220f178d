package kubeexp

import (
	"slices"
	"time"

	"github.com/ringside/ringside/experiments/backend/kube"
)

// kube-rebalance's counting, from the electors' events and the leaders
// per node: the moves and the gaps they leave, the spread, and the fewest
// moves that would have balanced it.

// moveGaps is, for every leadership that started after since by another
// candidate than the election's previous leader (a move), how long its
// election had no leader before it: from the end of the previous
// leadership ("stopped" or "killed") to this "started" — 0 when they
// overlapped. A move with no previous end in the events counts from
// since. Leaderships after since that the previous leader started again
// are counted apart (regained).
func moveGaps(events []kube.Event, since time.Time) (out []time.Duration, regained int) {
	ended := map[string]time.Time{} // election → its last leadership's end
	leading := map[string]int{}     // election → leaderships under way
	last := map[string]string{}     // election → the candidate that led it last
	for _, e := range kube.SortByTime(events) {
		switch e.Event {
		case "started":
			again := last[e.Election] == e.ID
			last[e.Election] = e.ID
			switch {
			case !e.TS.After(since):
			case again:
				regained++
			default:
				gap := time.Duration(0)
				if leading[e.Election] == 0 {
					from, ok := ended[e.Election]
					if !ok || from.Before(since) {
						from = since
					}
					gap = max(0, e.TS.Sub(from))
				}
				out = append(out, gap)
			}
			leading[e.Election]++
		case "stopped", "killed":
			if leading[e.Election] > 0 {
				leading[e.Election]--
			}
			ended[e.Election] = e.TS
		}
	}
	return out, regained
}

// fullest is the node of nodes with the most leaders (the first such).
func fullest(counts map[string]int, nodes []string) string {
	best := nodes[0]
	for _, n := range nodes {
		if counts[n] > counts[best] {
			best = n
		}
	}
	return best
}

// spreadOf is max − min of counts over nodes.
func spreadOf(counts map[string]int, nodes []string) int {
	hi, lo := 0, -1
	for _, n := range nodes {
		hi = max(hi, counts[n])
		if lo < 0 || counts[n] < lo {
			lo = counts[n]
		}
	}
	return hi - max(lo, 0)
}

// minMoves is the fewest leader moves that spread the counts over nodes
// within one, where any leader may move to any node: the fullest nodes
// keep ⌈L/N⌉, the rest ⌊L/N⌋, and every leader above that moves once.
func minMoves(counts map[string]int, nodes []string) int {
	c := make([]int, 0, len(nodes))
	total := 0
	for _, n := range nodes {
		c = append(c, counts[n])
		total += counts[n]
	}
	slices.SortFunc(c, func(a, b int) int { return b - a })
	moves := 0
	for i, v := range c {
		target := total / len(c)
		if i < total%len(c) {
			target++
		}
		moves += max(0, v-target)
	}
	return moves
}
