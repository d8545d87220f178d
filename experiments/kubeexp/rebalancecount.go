package kubeexp

import (
	"slices"
	"time"

	"github.com/ringside/ringside/experiments/backend/kube"
)

// kube-rebalance's counting, from the electors' events and the leaders
// per node: the moves and the gaps they leave, the spread, and the fewest
// moves that would have balanced it.

// moveCount is what moveGaps counts after the join or return.
type moveCount struct {
	// For every leadership started by another candidate than the
	// election's previous leader (a move), how long its election had no
	// leader before it.
	gaps []time.Duration
	// Of those moves, the ones the previous leader handed over: its
	// "stopped" named this candidate (a move the controller ordered). The
	// rest are re-elections, after a leader lost its Lease.
	ordered int
	// Leaderships the previous leader started again (no move).
	regained int
}

// moveGaps counts the leaderships that started after since. A move's gap
// runs from the end of the previous leadership ("stopped" or "killed") to
// its "started" — 0 when they overlapped; a move with no previous end in
// the events counts from since.
func moveGaps(events []kube.Event, since time.Time) moveCount {
	var out moveCount
	ended := map[string]time.Time{} // election → its last leadership's end
	leading := map[string]int{}     // election → leaderships under way
	last := map[string]string{}     // election → the candidate that led it last
	handed := map[string]string{}   // election → whom its last leader's "stopped" named
	for _, e := range kube.SortByTime(events) {
		switch e.Event {
		case "started":
			again := last[e.Election] == e.ID
			ordered := handed[e.Election] == e.ID
			last[e.Election], handed[e.Election] = e.ID, ""
			switch {
			case !e.TS.After(since):
			case again:
				out.regained++
			default:
				gap := time.Duration(0)
				if leading[e.Election] == 0 {
					from, ok := ended[e.Election]
					if !ok || from.Before(since) {
						from = since
					}
					gap = max(0, e.TS.Sub(from))
				}
				out.gaps = append(out.gaps, gap)
				if ordered {
					out.ordered++
				}
			}
			leading[e.Election]++
		case "stopped", "killed":
			if leading[e.Election] > 0 {
				leading[e.Election]--
			}
			ended[e.Election] = e.TS
			if e.ID == last[e.Election] {
				handed[e.Election] = e.Leader // "" for a kill
			}
		}
	}
	return out
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
