package score

import (
	"math"
	"slices"
	"time"
)

// Availability is seed 004's response-time score for one worker. Times are
// taken in milliseconds: the penalty's e^−(effective−threshold) is only
// meaningful in some unit, and milliseconds make a worker 1 ms past its
// threshold lose about 63 % of the 20-point penalty.
type Availability struct {
	window []float64 // most recent last, ms
	size   int
	best   int
	// ThresholdFactor sets the dynamic threshold = factor × best (default 2).
	ThresholdFactor float64
	// Floor is the resolution of a response time: shorter times count as
	// Floor. Without it, sub-millisecond loopback jitter (0.3 ms against
	// 1.2 ms) swings the base term by a factor of 8 on an idle worker.
	// Default 2 ms; 0 in tests that check the bare formula.
	Floor time.Duration
}

// NewAvailability keeps the last size response times and takes the mean
// of the best of them as the best time.
func NewAvailability(size, best int) *Availability {
	size = max(size, 4)
	return &Availability{size: size, best: max(min(best, size), 1), ThresholdFactor: 2, Floor: 2 * time.Millisecond}
}

// Observe records one response time (a failed probe should be recorded as
// the probe's timeout, so it drags the score down).
func (a *Availability) Observe(d time.Duration) {
	ms := float64(max(d, a.Floor)) / float64(time.Millisecond)
	if math.IsNaN(ms) || ms < 0 {
		return
	}
	if len(a.window) == a.size {
		copy(a.window, a.window[1:])
		a.window = a.window[:a.size-1]
	}
	a.window = append(a.window, ms)
}

// Times returns the window, oldest first (for persistence).
func (a *Availability) Times() []float64 { return slices.Clone(a.window) }

// AvailParts shows how the availability score came about.
type AvailParts struct {
	Current, Avg, Best, Effective, Threshold float64 // ms
	Base, Penalty, Trend, Score              float64
}

// Score computes s_a = clamp(base − penalty + 10·trend, 0, 100) with
// effective = 0.3·current + 0.7·avg, base = 100·(best/effective)^1.5,
// penalty = 20·(1 − e^−(effective − threshold)) above the threshold and
// trend = (avg_older − avg_recent)/avg_older. With no observation yet the
// worker is presumed available (100).
func (a *Availability) Score() AvailParts {
	n := len(a.window)
	if n == 0 {
		return AvailParts{Base: 100, Score: 100}
	}
	p := AvailParts{Current: a.window[n-1], Avg: mean(a.window)}
	sorted := slices.Clone(a.window)
	slices.Sort(sorted)
	p.Best = mean(sorted[:min(a.best, n)])
	p.Effective = 0.3*p.Current + 0.7*p.Avg
	p.Threshold = a.ThresholdFactor * p.Best
	switch {
	case p.Effective <= 0:
		p.Base = 100 // instantaneous answers: nothing to be faster than
	default:
		p.Base = 100 * math.Pow(p.Best/p.Effective, 1.5)
	}
	if p.Effective > p.Threshold {
		p.Penalty = 20 * (1 - math.Exp(-(p.Effective - p.Threshold)))
	}
	if n >= 4 {
		older, recent := mean(a.window[:n/2]), mean(a.window[n/2:])
		if older > 0 {
			p.Trend = (older - recent) / older
		}
	}
	p.Score = clamp(p.Base - p.Penalty + 10*p.Trend)
	return p
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
