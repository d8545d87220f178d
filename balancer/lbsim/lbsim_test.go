package lbsim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/balancer/pick"
)

func config(picker string, n int, util float64) Config {
	caps := make([]float64, n)
	for i := range caps {
		caps[i] = []float64{1, 2, 4}[i%3]
	}
	return Config{Picker: picker, Capacities: caps, Slots: 2, QueueLimit: 200, Service: 10 * time.Millisecond,
		Utilisation: util, Duration: 6 * time.Second, WarmUp: time.Second, Noisy: 0, NoisyFactor: 0.25,
		ProbeRTT: 200 * time.Microsecond}
}

func TestSameSeedSameResult(t *testing.T) {
	for _, p := range pick.Algorithms {
		a, err := Run(config(p, 8, 0.8), 42)
		require.NoError(t, err, p)
		b, err := Run(config(p, 8, 0.8), 42)
		require.NoError(t, err)
		assert.Equal(t, a, b, p)
		c, err := Run(config(p, 8, 0.8), 43)
		require.NoError(t, err)
		assert.NotEqual(t, a, c, "%s: another seed, another run", p)
	}
}

// Little's law and the offered load: at 50 % utilisation on equal
// servers nothing is dropped, the arrivals match the rate, and the mean
// latency is the service time plus a little queueing.
func TestLoadModel(t *testing.T) {
	c := config(pick.RoundRobin, 4, 0.5)
	c.Capacities = []float64{1, 1, 1, 1}
	c.Noisy = -1
	r, err := Run(c, 1)
	require.NoError(t, err)
	want := 0.5 * 8 / 0.010 * 5 // rate × measured seconds
	assert.InDelta(t, want, float64(r.Requests), 4*want/100)
	assert.Zero(t, r.Dropped)
	assert.Greater(t, r.Mean, 10*time.Millisecond)
	assert.Less(t, r.Mean, 15*time.Millisecond)
	assert.Less(t, r.P50, r.P99)
	assert.LessOrEqual(t, r.P99, r.P999)
	assert.Equal(t, r.P99, r.OfferedP99, "nothing dropped: the tails agree")
	assert.Equal(t, r.P999, r.OfferedP999)
	for _, n := range r.PerServer {
		assert.InDelta(t, float64(r.Requests)/4, float64(n), float64(r.Requests)/40)
	}
}

// Overload drops: at 3× the capacity most requests find full queues.
func TestOverloadDrops(t *testing.T) {
	r, err := Run(config(pick.WeightedRandom, 4, 3), 1)
	require.NoError(t, err)
	assert.Greater(t, r.Dropped, r.Requests/2)
	assert.Equal(t, Unanswered, r.OfferedP99, "half the offered requests were never answered")
	assert.Less(t, r.P99, Unanswered, "over served requests the tail is finite")
}

// A few drops: the offered tail is never below the served one, and it
// falls among the drops exactly when they pass the quantile's share.
func TestOfferedTailCountsDrops(t *testing.T) {
	for _, util := range []float64{0.8, 0.95, 1.2} {
		c := config(pick.WeightedRandom, 16, util)
		c.QueueLimit = 4
		r, err := Run(c, 7)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, r.OfferedP99, r.P99, "load %v", util)
		assert.GreaterOrEqual(t, r.OfferedP999, r.P999, "load %v", util)
		served := r.Requests - r.Dropped
		assert.Equal(t, float64(served) < 0.999*float64(r.Requests), r.OfferedP999 == Unanswered,
			"load %v: %d of %d dropped", util, r.Dropped, r.Requests)
	}
}

func TestCheck(t *testing.T) {
	for _, mut := range []func(*Config){
		func(c *Config) { c.Capacities = nil },
		func(c *Config) { c.Capacities[1] = 0 },
		func(c *Config) { c.Slots = 0 },
		func(c *Config) { c.Utilisation = 0 },
		func(c *Config) { c.WarmUp = c.Duration },
		func(c *Config) { c.Noisy = 99 },
		func(c *Config) { c.NoisyFactor = 2 },
	} {
		c := config(pick.P2C, 4, 0.5)
		mut(&c)
		_, err := Run(c, 1)
		assert.ErrorContains(t, err, "lbsim")
	}
	c := config("fastest", 4, 0.5)
	_, err := Run(c, 1)
	assert.ErrorContains(t, err, "want one of")
}

// BenchmarkRun reports simulated requests per second of wall time.
func BenchmarkRun(b *testing.B) {
	for _, p := range []string{pick.WeightedRandom, pick.P2CPeakEWMA, pick.Prequal} {
		b.Run(p, func(b *testing.B) {
			c := config(p, 100, 0.9)
			reqs := 0
			for b.Loop() {
				r, err := Run(c, 1)
				require.NoError(b, err)
				reqs += r.Requests + r.Dropped
			}
			b.ReportMetric(float64(reqs)/b.Elapsed().Seconds(), "requests/s")
		})
	}
}
