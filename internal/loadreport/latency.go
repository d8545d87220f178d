package loadreport

import (
	"math"
	"math/bits"
	"time"
)

// LatencyByRIF estimates the latency a request arriving now would see,
// as Prequal's servers do: from recent requests that arrived at the same
// number of requests in flight. An average over all requests lags a
// queue that is building; this does not. One time-weighted EWMA per RIF
// level, levels from 63 up pooled.
type LatencyByRIF struct {
	ewma  [rifLevels]float64
	stamp [rifLevels]time.Duration
	seen  uint64 // bit k: level k has an estimate
}

const rifLevels = 64

// Add records a request that arrived at rif requests in flight and took d.
func (l *LatencyByRIF) Add(now time.Duration, rif int, d time.Duration) {
	k := level(rif)
	w := 0.0
	if l.seen&(1<<k) != 0 {
		w = math.Exp(-float64(now-l.stamp[k]) / float64(latencyTau))
	}
	l.ewma[k] = l.ewma[k]*w + float64(d)*(1-w)
	l.stamp[k] = now
	l.seen |= 1 << k
}

// Estimate is the latency at rif: its level's, or else the nearest lower
// level's (failing that, higher) scaled by the ratio of the RIFs, as a
// queue of that length would. 0 before any request.
func (l *LatencyByRIF) Estimate(rif int) time.Duration {
	k := level(rif)
	if l.seen&(1<<k) != 0 {
		return time.Duration(l.ewma[k])
	}
	near := -1
	if below := l.seen & (1<<k - 1); below != 0 {
		near = 63 - bits.LeadingZeros64(below)
	} else if above := l.seen >> k; above != 0 {
		near = k + bits.TrailingZeros64(above)
	}
	if near < 0 {
		return 0
	}
	return time.Duration(l.ewma[near] * float64(k+1) / float64(near+1))
}

func level(rif int) int { return max(0, min(rif, rifLevels-1)) }
