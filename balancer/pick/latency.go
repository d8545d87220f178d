package pick

import (
	"container/heap"
	"math"
	"math/bits"
	"sync"
	"time"
)

// p2cPeakEWMA is power of two choices with peak-EWMA latency, as Finagle's
// and linkerd's balancers do: of two random upstreams, take the one of
// lower cost = latency EWMA × (requests in flight + 1). The EWMA jumps up
// to a slower response at once and decays towards faster ones with time
// constant Tuning.Decay (Load.Observe). A upstream never observed costs 0
// while idle, so new upstreams are tried, and a penalty once it has
// requests in flight, so one is not flooded before its first answer.
type p2cPeakEWMA struct {
	live []int
	in   Inputs
}

// unobservedPenalty is Finagle's Penalty (Long.MaxValue >> 16), in ns.
const unobservedPenalty = float64(math.MaxInt64 >> 16)

func (p *p2cPeakEWMA) Pick(rnd uint64) int {
	switch len(p.live) {
	case 0:
		return -1
	case 1:
		return p.live[0]
	}
	i, j := two(p.live, rnd)
	now := p.in.Now()
	if p.cost(j, now) < p.cost(i, now) {
		return j
	}
	return i
}

func (p *p2cPeakEWMA) cost(i int, now time.Duration) float64 {
	l := p.in.Loads[i]
	active := float64(l.Active.Load())
	lat := l.decayed(now, p.in.Tuning.Decay)
	if lat == 0 && active > 0 {
		return unobservedPenalty + active
	}
	return lat * (active + 1)
}

func (p *p2cPeakEWMA) Observe(i int, latency time.Duration, failed bool) {
	p.in.Loads[i].Observe(p.in.Now(), latency, failed, p.in.Tuning.Decay, p.in.Tuning.FailurePenalty)
}

// leastRequest is Envoy's least_request. With equal weights it takes the
// upstream with the fewest requests in flight of Tuning.Choices random ones
// (drawn with replacement, as Envoy does). With unequal weights it is
// earliest-deadline-first weighted round robin whose weights are
// weight / (in flight + 1)^bias, read when a upstream is scheduled again —
// so a upstream's weight follows its load one pick behind, as in Envoy.
type leastRequest struct {
	live    []int
	loads   []*Load
	weights []float64
	choices int
	bias    float64
	equal   bool

	mu  sync.Mutex
	edf edfHeap
}

func newLeastRequest(weights []float64, live []int, in Inputs) *leastRequest {
	l := &leastRequest{live: live, loads: in.Loads, weights: weights, choices: in.Tuning.Choices, bias: in.Tuning.Bias, equal: true}
	for _, i := range live {
		l.equal = l.equal && weights[i] == weights[live[0]]
	}
	if !l.equal {
		for k, i := range live {
			l.edf = append(l.edf, edfEntry{deadline: 1 / weights[i], seq: uint64(k), upstream: i})
		}
		heap.Init(&l.edf)
	}
	return l
}

func (l *leastRequest) Pick(rnd uint64) int {
	n := uint64(len(l.live))
	switch {
	case n == 0:
		return -1
	case n == 1:
		return l.live[0]
	case l.equal:
		best, bestLoad := -1, int64(math.MaxInt64)
		for c := range l.choices {
			if c > 0 {
				rnd = splitmix(rnd) // stretch the 64 bits over every draw
			}
			k, _ := bits.Mul64(rnd, n)
			i := l.live[k]
			if a := l.loads[i].Active.Load(); a < bestLoad {
				best, bestLoad = i, a
			}
		}
		return best
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := &l.edf[0]
	i := e.upstream
	w := l.weights[i]
	if a := float64(l.loads[i].Active.Load()); a > 0 {
		if l.bias == 1 {
			w /= a + 1
		} else {
			w /= math.Pow(a+1, l.bias)
		}
	}
	e.deadline += 1 / w
	e.seq += uint64(len(l.live)) // FIFO among equal deadlines
	heap.Fix(&l.edf, 0)
	return i
}

// splitmix is SplitMix64's step, to stretch 64 random bits over many draws.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

type edfEntry struct {
	deadline float64
	seq      uint64
	upstream int
}

type edfHeap []edfEntry

func (h edfHeap) Len() int { return len(h) }
func (h edfHeap) Less(a, b int) bool {
	return h[a].deadline < h[b].deadline || h[a].deadline == h[b].deadline && h[a].seq < h[b].seq
}
func (h edfHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *edfHeap) Push(x any)   { *h = append(*h, x.(edfEntry)) }
func (h *edfHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
