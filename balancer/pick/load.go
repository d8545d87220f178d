package pick

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Load is what a balancer has learned of one upstream: requests in flight,
// the peak-EWMA of its latency, and its last load report. The balancer
// keeps it by worker ID across table swaps, so what a picker learned
// survives the agent's next weights; lb-sim keeps one per server. Safe for
// concurrent use: picks read atomics, observations take a small lock.
type Load struct {
	Active atomic.Int64 // requests in flight

	mu     sync.Mutex // serialises writers of the fields below
	ewma   atomic.Uint64
	stamp  atomic.Int64 // ns on the picker clock of the last observation
	report loadReport
}

// Observe records that a request finished after latency at now. A failure
// counts as a latency of penalty (a upstream that fails fast must not look
// fast and draw the traffic in); decay is the EWMA's time constant.
func (l *Load) Observe(now, latency time.Duration, failed bool, decay, penalty time.Duration) {
	rtt := float64(latency)
	if failed {
		rtt = max(rtt, float64(penalty))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := rtt // peak-sensitive: a slower response is believed at once
	if rtt <= l.decayed(now, decay) {
		// Else blend, weighing the old estimate by e^(−Δt/τ) for the time
		// since the last observation (Finagle, linkerd). Reads do not
		// write, so picks stay lock-free.
		w := math.Exp(-float64(now-time.Duration(l.stamp.Load())) / float64(decay))
		cur = math.Float64frombits(l.ewma.Load())*w + rtt*(1-w)
	}
	l.ewma.Store(math.Float64bits(cur))
	l.stamp.Store(int64(now))
}

// decayed is the EWMA at now with no observation since: it decays towards
// 0 with time constant decay, so a upstream that was slow once is tried
// again after a while instead of starving (Finagle reads its cost this
// way).
func (l *Load) decayed(now, decay time.Duration) float64 {
	v := math.Float64frombits(l.ewma.Load())
	if v == 0 {
		return 0
	}
	dt := now - time.Duration(l.stamp.Load())
	if dt <= 0 {
		return v
	}
	return v * math.Exp(-float64(dt)/float64(decay))
}

// Latency is the peak-EWMA latency at now (0 before any observation).
func (l *Load) Latency(now, decay time.Duration) time.Duration {
	return time.Duration(l.decayed(now, decay))
}

// LoadReport is one upstream's load report (gRPC A58's ORCA fields): queries
// and errors per second it served, and its utilisation in [0, 1] (CPU, or
// the application's own measure of being busy).
type LoadReport struct {
	QPS, EPS, Utilization float64
}

// loadReport is the WRR state of a upstream (gRPC A58): the weight of its
// last valid report and since when its reports have been valid without a
// gap longer than the expiry period.
type loadReport struct {
	weight              float64
	nonEmptySince, last time.Duration
	valid               bool
}

// Reported records a load report received at now. penalty is A58's
// error_utilization_penalty; expiry its weight_expiration_period. A report
// without queries or utilisation carries no weight and is ignored.
func (l *Load) Reported(now time.Duration, r LoadReport, penalty float64, expiry time.Duration) {
	if r.QPS <= 0 || r.Utilization <= 0 || math.IsNaN(r.QPS+r.EPS+r.Utilization) || math.IsInf(r.QPS+r.EPS+r.Utilization, 0) {
		return
	}
	w := r.QPS / (r.Utilization + max(r.EPS, 0)/r.QPS*penalty)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.report.valid || now-l.report.last > expiry {
		l.report.nonEmptySince = now
	}
	l.report = loadReport{weight: w, nonEmptySince: l.report.nonEmptySince, last: now, valid: true}
}

// reportWeight is the weight to use at now: 0 while the upstream is in its
// blackout period (its first valid report is younger than blackout, so a
// upstream that just started or came back does not get its weight on one
// sample) or when its last report is older than expiry.
func (l *Load) reportWeight(now, blackout, expiry time.Duration) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.report
	if !r.valid || now-r.last > expiry || now-r.nonEmptySince < blackout {
		return 0
	}
	return r.weight
}

// NewLoads returns n fresh Loads.
func NewLoads(n int) []*Load {
	out := make([]*Load, n)
	for i := range out {
		out[i] = &Load{}
	}
	return out
}
