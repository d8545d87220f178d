package pick

import (
	"sync"
	"sync/atomic"
	"time"
)

// loadReportWRR is gRPC's weighted_round_robin (proposal A58): each upstream's
// weight is qps / (utilisation + error penalty × eps / qps) from its load
// reports (Load.Reported) — a weight takes effect only after a blackout
// period of valid reports and lapses when reports stop for the expiry
// period; upstreams without a weight get the mean of the others. Weights
// are recomputed every update period and served by gRPC's static stride
// scheduler: lock-free, deterministic, each pick a few atomic increments.
// When no upstream has a weight from reports, the feed's weights (the
// agent's scores) are used.
type loadReportWRR struct {
	live  []int
	feed  []float64
	in    Inputs
	seq   atomic.Uint64
	sched atomic.Pointer[stride]

	mu   sync.Mutex
	next atomic.Int64 // picker-clock ns of the next weight update
}

func newLoadReportWRR(weights []float64, live []int, in Inputs) *loadReportWRR {
	r := &loadReportWRR{live: live, feed: weights, in: in}
	r.update(in.Now())
	return r
}

func (*loadReportWRR) ReadsLoadReports() {}

func (r *loadReportWRR) Pick(uint64) int {
	if len(r.live) == 0 {
		return -1
	}
	if now := r.in.Now(); int64(now) >= r.next.Load() {
		r.mu.Lock()
		if int64(now) >= r.next.Load() {
			r.update(now)
		}
		r.mu.Unlock()
	}
	return r.sched.Load().pick(&r.seq)
}

// update recomputes the weights at now.
func (r *loadReportWRR) update(now time.Duration) {
	t := r.in.Tuning
	w := make([]float64, len(r.live))
	sum, n := 0.0, 0
	for k, i := range r.live {
		w[k] = r.in.Loads[i].reportWeight(now, t.Blackout, t.Expiry)
		if w[k] > 0 {
			sum += w[k]
			n++
		}
	}
	switch {
	case n == 0:
		for k, i := range r.live {
			w[k] = r.feed[i]
		}
	case n < len(w):
		for k := range w {
			if w[k] == 0 {
				w[k] = sum / float64(n)
			}
		}
	}
	r.sched.Store(newStride(r.live, w))
	r.next.Store(int64(now + t.Period))
}

// stride is gRPC's static stride scheduler: weights scaled to 16 bits; a
// sequence number walks the upstreams round-robin, and upstream k's turn in
// generation g is taken when (w_k·g + k·offset) mod max ≥ max − w_k, so it
// comes up w_k/max of its turns, spread evenly. Weights are clamped to
// 10× the mean and at least 1 % of the largest, as gRPC does, which bounds
// the turns skipped per pick.
type stride struct {
	upstreams []int
	scaled    []uint32
}

const strideMax = 1<<16 - 1

func newStride(upstreams []int, w []float64) *stride {
	mean := 0.0
	for _, x := range w {
		mean += x
	}
	mean /= float64(len(w))
	hi := 0.0
	for k := range w {
		w[k] = min(w[k], 10*mean)
		hi = max(hi, w[k])
	}
	s := &stride{upstreams: upstreams, scaled: make([]uint32, len(w))}
	for k, x := range w {
		s.scaled[k] = uint32(max(x/hi, 0.01)*strideMax + 0.5)
	}
	return s
}

func (s *stride) pick(seq *atomic.Uint64) int {
	n := uint64(len(s.upstreams))
	const offset = strideMax / 2
	for {
		q := seq.Add(1) - 1
		k, gen := q%n, q/n
		w := uint64(s.scaled[k])
		if (w*gen+k*offset)%strideMax >= strideMax-w {
			return s.upstreams[k]
		}
	}
}
