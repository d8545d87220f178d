package pick

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clock is a hand-moved picker clock.
type clock struct{ now time.Duration }

func (c *clock) Now() time.Duration { return c.now }

func aware(t *testing.T, algo string, weights []float64, c *clock, tune Tuning) (Picker, []*Load) {
	t.Helper()
	loads := NewLoads(len(weights))
	p, err := NewPicker(algo, weights, Inputs{Loads: loads, Now: c.Now, Tuning: tune})
	require.NoError(t, err)
	return p, loads
}

func TestP2CPeakEWMA(t *testing.T) {
	c := &clock{}
	p, loads := aware(t, P2CPeakEWMA, []float64{1, 1}, c, Tuning{})
	o := p.(Observer)
	// Never observed and idle: cost 0 — both tie, the first draw wins.
	assert.Equal(t, 1, p.Pick(0xc000000000000000))
	// Observed but busy beats never observed with requests in flight
	// (Finagle's penalty).
	loads[0].Active.Store(1)
	o.Observe(1, 50*time.Millisecond, false)
	loads[1].Active.Store(3)
	assert.Equal(t, 1, p.Pick(0))

	loads[0].Active.Store(0)
	loads[1].Active.Store(0)
	o.Observe(0, 100*time.Millisecond, false)
	o.Observe(1, time.Millisecond, false)
	for _, rnd := range []uint64{0, 1 << 63, 0xffffffffffffffff} {
		assert.Equal(t, 1, p.Pick(rnd), "the faster upstream wins every pair")
	}
	// Peak: one slow answer counts at once.
	c.now += time.Millisecond
	o.Observe(1, 300*time.Millisecond, false)
	assert.Equal(t, 0, p.Pick(0))
	assert.InDelta(t, float64(300*time.Millisecond), float64(loads[1].Latency(c.now, 10*time.Second)), float64(time.Microsecond))
	// A faster answer is blended by the time since the last: after one
	// time constant, e^-1 of the old estimate is left.
	c.now += 10 * time.Second
	o.Observe(1, 0, false)
	assert.InDelta(t, 300e6*0.36788, float64(loads[1].Latency(c.now, 10*time.Second)), 1e4)
	// Decay: a upstream slow long ago is tried again instead of starving.
	c2 := &clock{}
	q, _ := aware(t, P2CPeakEWMA, []float64{1, 1}, c2, Tuning{})
	q.(Observer).Observe(0, 100*time.Millisecond, false)
	c2.now = 50 * time.Second
	q.(Observer).Observe(1, time.Millisecond, false)
	assert.Equal(t, 0, q.Pick(0), "100 ms × e^-5 ≈ 0.67 ms < 1 ms")
	// A failure counts as the failure penalty, however fast it was.
	q.(Observer).Observe(0, time.Microsecond, true)
	assert.Equal(t, 1, q.Pick(0))
}

func TestLeastRequest(t *testing.T) {
	c := &clock{}
	// Equal weights: the least loaded of the choices.
	p, loads := aware(t, LeastRequest, []float64{1, 1, 1, 1}, c, Tuning{Choices: 64})
	for i, a := range []int64{5, 0, 2, 9} {
		loads[i].Active.Store(a)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 100 {
		assert.Equal(t, 1, p.Pick(rng.Uint64()))
	}
	// Two draws with replacement: the busiest wins only when drawn twice.
	two, loads2 := aware(t, LeastRequest, []float64{2, 2, 0, 2}, c, Tuning{})
	loads2[0].Active.Store(7)
	got := counts(t, two, 4, 9000, 1)
	assert.Zero(t, got[2], "drained")
	assert.InDelta(t, 1000, got[0], 150, "(1/3)² of the picks")

	// Unequal weights, nothing in flight: EDF follows the weights exactly.
	w, _ := aware(t, LeastRequest, []float64{3, 1, 0}, c, Tuning{})
	assert.Equal(t, []int{300, 100, 0}, counts(t, w, 3, 400, 1))
	// Requests in flight divide a weight: 4/(3+1) = 1 against 1.
	b, loadsB := aware(t, LeastRequest, []float64{4, 1}, c, Tuning{})
	loadsB[0].Active.Store(3)
	got = counts(t, b, 2, 1000, 1)
	assert.InDelta(t, 500, got[0], 2)
	// A larger bias punishes load more.
	b2, loadsB2 := aware(t, LeastRequest, []float64{4, 1}, c, Tuning{Bias: 2})
	loadsB2[0].Active.Store(3)
	got2 := counts(t, b2, 2, 1000, 1)
	assert.InDelta(t, 200, got2[0], 2, "4/(3+1)² = 0.25 against 1")
}

func TestReportWRR(t *testing.T) {
	c := &clock{}
	tune := Tuning{Blackout: 10 * time.Second, Expiry: time.Minute, Period: time.Second}
	p, loads := aware(t, LoadReportWRR, []float64{3, 1, 0}, c, tune)
	// No reports: the feed's weights.
	assert.InDeltaSlice(t, []float64{300, 100, 0}, floats(counts(t, p, 3, 400, 1)), 2)

	report := func(i int, r LoadReport) { loads[i].Reported(c.now, r, 1, time.Minute) }
	for s := range 12 {
		c.now = time.Duration(s) * time.Second
		report(0, LoadReport{QPS: 100, Utilization: 0.5}) // weight 200
		report(1, LoadReport{QPS: 100, Utilization: 1})   // weight 100
		report(2, LoadReport{QPS: 100, Utilization: 1})   // drained: never picked
		if s == 5 {
			p.Pick(0) // within the blackout: still the feed's weights
			assert.InDeltaSlice(t, []float64{300, 100, 0}, floats(counts(t, p, 3, 400, 1)), 2)
		}
	}
	c.now += time.Second // past the blackout and the update period
	assert.InDeltaSlice(t, []float64{200, 100, 0}, floats(counts(t, p, 3, 300, 1)), 2)

	// Errors cost weight: 100/(0.5 + 50/100·1) = 100.
	report(0, LoadReport{QPS: 100, EPS: 50, Utilization: 0.5})
	c.now += time.Second
	assert.InDeltaSlice(t, []float64{150, 150, 0}, floats(counts(t, p, 3, 300, 1)), 2)

	// Upstream 0 stops reporting: past the expiry it is unreported and gets
	// the mean of the others (here upstream 1's 100).
	for range 70 {
		c.now += time.Second
		report(1, LoadReport{QPS: 100, Utilization: 0.25}) // weight 400
	}
	assert.InDeltaSlice(t, []float64{250, 250, 0}, floats(counts(t, p, 3, 500, 1)), 2)

	// Malformed reports are ignored.
	before := loads[1].reportWeight(c.now, 0, time.Minute)
	report(1, LoadReport{QPS: 0, Utilization: 1})
	report(1, LoadReport{QPS: 1, Utilization: 0})
	assert.Equal(t, before, loads[1].reportWeight(c.now, 0, time.Minute))
}

func TestPrequal(t *testing.T) {
	c := &clock{}
	p, _ := aware(t, Prequal, []float64{1, 1, 1, 0}, c, Tuning{HotQuantile: 0.5, Reuse: 2, RProbe: 1.5, MaxProbeAge: time.Second})
	pq := p.(Prober)
	// Empty pool: uniform over the live upstreams.
	assert.Equal(t, 0, p.Pick(0))
	assert.Equal(t, 2, p.Pick(0xffffffffffffffff))
	assert.Len(t, pq.TakeProbes(nil, 7), 3, "1.5 probes per pick, two picks")
	for _, i := range pq.TakeProbes(nil, 7) {
		t.Fatalf("probe %d owed twice", i)
	}

	pq.Probed(0, 1, 10*time.Millisecond)
	pq.Probed(1, 2, time.Millisecond)
	pq.Probed(2, 50, 100*time.Microsecond) // hot: above the median RIF 2
	assert.Equal(t, 1, p.Pick(0), "the cold probe of lowest latency")
	assert.Equal(t, 0, p.Pick(0), "the pick counted upstream 1's RIF up past the threshold: hot now")
	assert.Equal(t, 0, p.Pick(0), "reused once")
	assert.Equal(t, 1, p.Pick(0), "0's probe used up, the rest hot: the lowest RIF")
	assert.Equal(t, 2, p.Pick(0), "the last probe")
	// Aged out: random again.
	c.now += 2 * time.Second
	assert.Equal(t, 0, p.Pick(0))
	assert.Equal(t, 2, p.Pick(0xffffffffffffffff))

	// A full pool drops its oldest probe.
	q, _ := aware(t, Prequal, []float64{1, 1}, c, Tuning{PoolSize: 2, HotQuantile: 1})
	qp := q.(Prober)
	qp.Probed(0, 0, time.Microsecond)
	qp.Probed(1, 0, time.Millisecond)
	qp.Probed(1, 0, 2*time.Millisecond)
	assert.Equal(t, 1, q.Pick(0), "upstream 0's probe was the oldest")
}

func TestTuningIsChecked(t *testing.T) {
	for _, tc := range []struct {
		t    Tuning
		want string
	}{
		{Tuning{Bias: -1}, "bias"},
		{Tuning{Choices: 100}, "choices"},
		{Tuning{PoolSize: maxPool + 1}, "pool size"},
		{Tuning{HotQuantile: 2}, "hot quantile"},
		{Tuning{Decay: -time.Second}, "negative"},
	} {
		_, err := NewPicker(Prequal, []float64{1}, Inputs{Tuning: tc.t})
		assert.ErrorContains(t, err, tc.want)
	}
}

func floats(c []int) []float64 {
	out := make([]float64, len(c))
	for i, x := range c {
		out[i] = float64(x)
	}
	return out
}
