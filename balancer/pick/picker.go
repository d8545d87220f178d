package pick

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Picker chooses one upstream of a fixed set. rnd is 64 fresh random bits
// from the caller, so a seeded caller gets a reproducible sequence and the
// proxy can use the runtime's per-thread generator. A picker never returns
// a upstream of weight 0 (drained), and returns −1 only when every weight is 0.
type Picker interface {
	Pick(rnd uint64) int
}

// Observer is a picker that learns from how its picks went: the caller
// reports every finished request to upstream i (p2c-ewma).
type Observer interface {
	Observe(i int, latency time.Duration, failed bool)
}

// Prober is a picker that learns by probing (prequal): after each pick
// the caller asks which upstreams to probe, probes them asynchronously and
// reports each answer — the upstream's requests in flight and recent
// latency — with Probed.
type Prober interface {
	TakeProbes(dst []int, rnd uint64) []int
	Probed(i int, rif int64, latency time.Duration)
}

// LoadReportReader is a picker that weighs the load reports workers attach
// to their responses (wrr-reports): the caller passes each one to the
// upstream's Load.Reported.
type LoadReportReader interface {
	ReadsLoadReports()
}

// Algorithms the balancer offers; weighted-random is seed 004's, the others
// are baselines for experiments (sources in each picker's comment).
const (
	WeightedRandom = "weighted-random"
	SmoothWRR      = "smooth-wrr"
	RoundRobin     = "round-robin"
	LeastConn      = "least-conn"
	P2C            = "p2c"
	P2CPeakEWMA    = "p2c-ewma"
	LeastRequest   = "least-request"
	LoadReportWRR  = "wrr-reports"
	Prequal        = "prequal"
)

// Algorithms lists every picker name, in the order experiments report them.
var Algorithms = []string{WeightedRandom, SmoothWRR, RoundRobin, LeastConn, P2C, P2CPeakEWMA, LeastRequest, LoadReportWRR, Prequal}

// WeightFollowing are seed 004's comparison: pickers that follow the
// weights or the in-flight counts alone, with nothing learned over time
// (lb-efficiency's default set).
var WeightFollowing = Algorithms[:5]

// LatencyAware are the pickers that learn latency or load over time.
var LatencyAware = Algorithms[5:]

// Inputs are what a picker reads besides the weights.
type Inputs struct {
	// Loads holds one Load per upstream, aligned with the weights: requests
	// in flight (least-conn, p2c, p2c-ewma, least-request), observed
	// latency (p2c-ewma) and load reports (wrr-reports). A caller that
	// leaves it nil gets fresh ones.
	Loads []*Load
	// Now is the clock of what pickers learn over time (EWMA decay, report
	// blackout and expiry, probe age): monotonic in the balancer, virtual
	// in lb-sim. Nil means a clock that stands at 0.
	Now    func() time.Duration
	Tuning Tuning
}

// NewPicker builds the named picker over weights. Weights must be finite
// and non-negative; all-zero is allowed here (every upstream drained) and
// makes Pick return −1.
func NewPicker(algo string, weights []float64, in Inputs) (Picker, error) {
	if err := CheckWeights(weights, true); err != nil {
		return nil, err
	}
	live := make([]int, 0, len(weights))
	for i, w := range weights {
		if w > 0 {
			live = append(live, i)
		}
	}
	if in.Loads == nil {
		in.Loads = NewLoads(len(weights))
	}
	if len(in.Loads) != len(weights) {
		return nil, fmt.Errorf("picker %s: %d loads for %d upstreams", algo, len(in.Loads), len(weights))
	}
	if in.Now == nil {
		in.Now = func() time.Duration { return 0 }
	}
	if err := in.Tuning.check(); err != nil {
		return nil, fmt.Errorf("picker %s: %w", algo, err)
	}
	in.Tuning = in.Tuning.WithDefaults()
	switch algo {
	case WeightedRandom:
		return newAlias(weights), nil
	case SmoothWRR:
		return newSmoothWRR(weights), nil
	case RoundRobin:
		return &roundRobin{live: live}, nil
	case LeastConn:
		return &leastConn{live: live, loads: in.Loads}, nil
	case P2C:
		return &p2c{live: live, loads: in.Loads}, nil
	case P2CPeakEWMA:
		return &p2cPeakEWMA{live: live, in: in}, nil
	case LeastRequest:
		return newLeastRequest(weights, live, in), nil
	case LoadReportWRR:
		return newLoadReportWRR(weights, live, in), nil
	case Prequal:
		return newPrequal(live, in), nil
	}
	return nil, fmt.Errorf("picker %q: want one of %s", algo, strings.Join(Algorithms, ", "))
}

// alias is Vose's alias method: one uniform column and one comparison per
// pick, whatever the number of upstreams. Probabilities are stored as
// 64-bit thresholds so a pick needs no floating point.
type alias struct {
	threshold []uint64 // pick column i when the low bits are below threshold[i]
	other     []int32  // else its alias
	n         uint64
}

func newAlias(weights []float64) Picker {
	n := len(weights)
	sum := 0.0
	for _, w := range weights {
		sum += w
	}
	if n == 0 || sum == 0 {
		return none{}
	}
	a := &alias{threshold: make([]uint64, n), other: make([]int32, n), n: uint64(n)}
	prob := make([]float64, n)
	var small, large []int
	for i, w := range weights {
		prob[i] = w * float64(n) / sum
		if prob[i] < 1 {
			small = append(small, i)
		} else {
			large = append(large, i)
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s, l := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		a.threshold[s], a.other[s] = toThreshold(prob[s]), int32(l)
		prob[l] -= 1 - prob[s]
		if prob[l] < 1 {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	// Whatever remains has probability 1 up to rounding — except a drained
	// upstream that rounding left over, which must still never be picked.
	heaviest := int32(slices.Index(weights, slices.Max(weights)))
	for _, i := range append(small, large...) {
		if weights[i] == 0 {
			a.threshold[i], a.other[i] = 0, heaviest
			continue
		}
		a.threshold[i], a.other[i] = math.MaxUint64, int32(i)
	}
	return a
}

func toThreshold(p float64) uint64 {
	if p <= 0 {
		return 0
	}
	if p >= 1 {
		return math.MaxUint64
	}
	return uint64(p * (1 << 63) * 2)
}

func (a *alias) Pick(rnd uint64) int {
	// The high half of the 128-bit product picks the column uniformly; the
	// low half is a fresh uniform word for the coin.
	col, coin := bits.Mul64(rnd, a.n)
	if coin < a.threshold[col] || a.threshold[col] == math.MaxUint64 {
		return int(col)
	}
	return int(a.other[col])
}

type none struct{}

func (none) Pick(uint64) int { return -1 }

type roundRobin struct {
	live []int
	next atomic.Uint64
}

func (r *roundRobin) Pick(uint64) int {
	if len(r.live) == 0 {
		return -1
	}
	return r.live[(r.next.Add(1)-1)%uint64(len(r.live))]
}

// leastConn picks the live upstream with the fewest requests in flight,
// breaking ties from a random start so equal upstreams share the load.
type leastConn struct {
	live  []int
	loads []*Load
}

func (l *leastConn) Pick(rnd uint64) int {
	n := len(l.live)
	if n == 0 {
		return -1
	}
	start, _ := bits.Mul64(rnd, uint64(n))
	// The scan runs from start to the end, then from the front to start,
	// and stops at the first idle upstream: none can beat it, and it is
	// the one a full scan would return. Under light load that is a few
	// steps instead of n (lb-sim's thousand upstreams).
	best, bestLoad := -1, int64(math.MaxInt64)
	for _, part := range [2][]int{l.live[start:], l.live[:start]} {
		for _, i := range part {
			if a := l.loads[i].Active.Load(); a < bestLoad {
				best, bestLoad = i, a
				if a <= 0 {
					return best
				}
			}
		}
	}
	return best
}

// p2c samples two distinct live upstreams and takes the less loaded one.
type p2c struct {
	live  []int
	loads []*Load
}

func (p *p2c) Pick(rnd uint64) int {
	n := uint64(len(p.live))
	switch n {
	case 0:
		return -1
	case 1:
		return p.live[0]
	}
	i, j := two(p.live, rnd)
	if p.loads[j].Active.Load() < p.loads[i].Active.Load() {
		return j
	}
	return i
}

// two draws two distinct members of live (at least two) from 64 random
// bits: the high halves of two 128-bit products pick uniformly.
func two(live []int, rnd uint64) (int, int) {
	n := uint64(len(live))
	a, lo := bits.Mul64(rnd, n)
	b, _ := bits.Mul64(lo, n-1)
	if b >= a {
		b++ // distinct from a
	}
	return live[a], live[b]
}
