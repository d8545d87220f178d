package pick

import (
	"math"
	"math/bits"
	"slices"
	"sync"
	"time"
)

// prequal is Prequal (Wydrowski, Kleinberg, Rumble, Archer: "Load is not
// what you should balance", NSDI 2024). The balancer probes random
// upstreams asynchronously — Tuning.RProbe probes per pick — for their
// requests in flight (RIF) and recent latency, and keeps the answers in a
// small pool. A pick uses the pool by the hot-cold rule: a upstream whose
// RIF is above the pool's Tuning.HotQuantile is hot; the cold probe of
// lowest latency wins, and if every probe is hot, the one of lowest RIF.
// The quantile is over the RIFs of the last pool-size answers as they
// arrived (the pool's own RIFs are counted up by the picks that use them).
// A probe serves at most Tuning.Reuse picks (its RIF counted up by each),
// ages out after Tuning.MaxProbeAge, and the oldest makes room for a new
// one in a full pool. With the pool empty it picks uniformly at random.
type prequal struct {
	live []int
	in   Inputs

	mu     sync.Mutex
	pool   []probe // oldest first
	hot    int64   // RIF threshold: above it a upstream is hot
	credit float64 // probes owed
	// The RIFs of the last PoolSize answers, in arrival order (a ring)
	// and sorted: the distribution the hot threshold is its quantile of.
	recent []int64
	next   int
	sorted []int64
}

type probe struct {
	upstream int
	rif      int64
	latency  time.Duration
	at       time.Duration
	uses     int
}

// maxPool bounds Tuning.PoolSize: the rule scans the pool on every pick.
const maxPool = 256

func newPrequal(live []int, in Inputs) *prequal {
	n := in.Tuning.PoolSize
	return &prequal{live: live, in: in, pool: make([]probe, 0, n), recent: make([]int64, 0, n), sorted: make([]int64, 0, n)}
}

func (p *prequal) Pick(rnd uint64) int {
	if len(p.live) == 0 {
		return -1
	}
	now := p.in.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.credit += p.in.Tuning.RProbe
	p.expire(now)
	if len(p.pool) == 0 {
		k, _ := bits.Mul64(rnd, uint64(len(p.live)))
		return p.live[k]
	}
	best, bestHot := -1, true
	for k := range p.pool {
		c := &p.pool[k]
		hot := c.rif > p.hot
		switch {
		case best < 0, bestHot && !hot:
			best, bestHot = k, hot
		case hot != bestHot:
		case !hot && c.latency < p.pool[best].latency, hot && c.rif < p.pool[best].rif:
			best = k
		}
	}
	c := &p.pool[best]
	i := c.upstream
	c.uses++
	c.rif++ // this pick is one more request in flight there
	if c.uses >= p.in.Tuning.Reuse {
		p.pool = append(p.pool[:best], p.pool[best+1:]...)
	}
	return i
}

// expire drops the probes older than the maximum age (the pool is in
// arrival order, so they lead it).
func (p *prequal) expire(now time.Duration) {
	k := 0
	for k < len(p.pool) && now-p.pool[k].at > p.in.Tuning.MaxProbeAge {
		k++
	}
	if k > 0 {
		p.pool = append(p.pool[:0], p.pool[k:]...)
	}
}

// TakeProbes appends to dst the upstreams to probe now: the whole probes
// owed by the picks so far, each a uniform random live upstream.
func (p *prequal) TakeProbes(dst []int, rnd uint64) []int {
	if len(p.live) == 0 {
		return dst
	}
	p.mu.Lock()
	n := int(p.credit)
	p.credit -= float64(n)
	p.mu.Unlock()
	for range n {
		k, _ := bits.Mul64(rnd, uint64(len(p.live)))
		dst = append(dst, p.live[k])
		rnd = splitmix(rnd)
	}
	return dst
}

// Probed adds a probe's answer to the pool and moves the hot threshold.
func (p *prequal) Probed(i int, rif int64, latency time.Duration) {
	rif = max(rif, 0)
	now := p.in.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pool) == p.in.Tuning.PoolSize {
		p.pool = append(p.pool[:0], p.pool[1:]...)
	}
	p.pool = append(p.pool, probe{upstream: i, rif: rif, latency: latency, at: now})
	p.hot = p.record(rif)
}

// record adds an answer's RIF to the recent ones and returns their
// Tuning.HotQuantile (nearest rank): two binary searches and two short
// moves, not a sort.
func (p *prequal) record(rif int64) int64 {
	if len(p.recent) < cap(p.recent) {
		p.recent = append(p.recent, rif)
	} else {
		old := p.recent[p.next]
		p.recent[p.next] = rif
		p.next = (p.next + 1) % len(p.recent)
		k, _ := slices.BinarySearch(p.sorted, old)
		p.sorted = slices.Delete(p.sorted, k, k+1)
	}
	k, _ := slices.BinarySearch(p.sorted, rif)
	p.sorted = slices.Insert(p.sorted, k, rif)
	rank := int(math.Ceil(p.in.Tuning.HotQuantile*float64(len(p.sorted)))) - 1
	return p.sorted[max(min(rank, len(p.sorted)-1), 0)]
}
