package pick

import "sync"

// smoothWRR is nginx's smooth weighted round robin: deterministic, and
// spreads a heavy upstream's turns between the others. nginx adds each
// upstream's weight to its current weight on every pick, takes the first
// upstream with the largest current weight and takes the sum of the
// weights, W, off it — a scan of every upstream per pick, which made
// smooth-wrr lb-sim's slowest picker at a thousand upstreams.
//
// After k picks upstream i's current weight is k·w_i − W·c_i, c_i its
// picks so far. Among upstreams of equal weight the one picked least
// (then the first) therefore leads: they take their turns in index order,
// round after round. So each distinct weight keeps a cursor, and a pick
// compares only the upstreams the cursors point at: O(distinct weights)
// per pick instead of O(n), the same sequence as nginx's (exactly so for
// weights whose sums floats hold exactly, as lb-sim's capacities).
type smoothWRR struct {
	mu      sync.Mutex
	total   float64
	classes []wrrClass
}

// wrrClass is the upstreams of one weight, in index order. The upstreams
// before next have been picked round+1 times, the others round times. The
// current weight of the one at next is acc − total·(round − base): acc is
// k·w less total·base, kept within (0, total] by moving whole totals into
// base, so neither side grows without bound however long the balancer
// runs.
type wrrClass struct {
	w, acc      float64
	base, round int64
	upstreams   []int
	next        int
}

func newSmoothWRR(weights []float64) *smoothWRR {
	s := &smoothWRR{}
	class := map[float64]int{}
	for i, w := range weights {
		if w == 0 {
			continue
		}
		s.total += w
		c, ok := class[w]
		if !ok {
			c = len(s.classes)
			class[w] = c
			s.classes = append(s.classes, wrrClass{w: w})
		}
		s.classes[c].upstreams = append(s.classes[c].upstreams, i)
	}
	return s
}

func (s *smoothWRR) Pick(uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	best, bestCur, bestIndex := -1, 0.0, 0
	for c := range s.classes {
		cl := &s.classes[c]
		cl.acc += cl.w
		if cl.acc > s.total {
			cl.acc -= s.total
			cl.base++
		}
		i := cl.upstreams[cl.next]
		cur := cl.acc - s.total*float64(cl.round-cl.base)
		if best < 0 || cur > bestCur || cur == bestCur && i < bestIndex {
			best, bestCur, bestIndex = c, cur, i
		}
	}
	if best < 0 {
		return -1
	}
	cl := &s.classes[best]
	if cl.next++; cl.next == len(cl.upstreams) {
		cl.next, cl.round = 0, cl.round+1
	}
	return bestIndex
}
