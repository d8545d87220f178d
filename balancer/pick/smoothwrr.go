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
// (then the first) therefore leads, so each distinct weight keeps a
// min-heap of its upstreams by (picks, index) and a pick compares only
// the heaps' heads: O(weights + log n) per pick instead of O(n), the same
// sequence as nginx's (exactly so for weights whose sums floats hold
// exactly, as lb-sim's capacities).
type smoothWRR struct {
	mu      sync.Mutex
	total   float64
	classes []wrrClass
}

// wrrClass is the upstreams of one weight. A member's current weight is
// acc − total·(picks − base): acc is k·w less total·base, kept within
// (0, total] by moving whole totals into base, so neither side grows
// without bound however long the balancer runs.
type wrrClass struct {
	w, acc  float64
	base    int64
	members []wrrMember // min-heap by (picks, index)
}

type wrrMember struct {
	picks int64
	index int
}

func (a wrrMember) before(b wrrMember) bool {
	return a.picks < b.picks || a.picks == b.picks && a.index < b.index
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
		// Indices arrive in increasing order with no picks yet: each
		// appended member is already in heap order.
		s.classes[c].members = append(s.classes[c].members, wrrMember{index: i})
	}
	return s
}

func (s *smoothWRR) Pick(uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	best, bestCur := -1, 0.0
	for c := range s.classes {
		cl := &s.classes[c]
		cl.acc += cl.w
		if cl.acc > s.total {
			cl.acc -= s.total
			cl.base++
		}
		head := cl.members[0]
		cur := cl.acc - s.total*float64(head.picks-cl.base)
		if best < 0 || cur > bestCur || cur == bestCur && head.index < s.classes[best].members[0].index {
			best, bestCur = c, cur
		}
	}
	if best < 0 {
		return -1
	}
	cl := &s.classes[best]
	i := cl.members[0].index
	cl.members[0].picks++
	cl.siftDown()
	return i
}

// siftDown restores the heap after the head's picks grew.
func (cl *wrrClass) siftDown() {
	m := cl.members
	j := 0
	for {
		k := 2*j + 1
		if k >= len(m) {
			return
		}
		if r := k + 1; r < len(m) && m[r].before(m[k]) {
			k = r
		}
		if !m[k].before(m[j]) {
			return
		}
		m[j], m[k] = m[k], m[j]
		j = k
	}
}
