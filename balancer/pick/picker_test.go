package pick

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func counts(t testing.TB, p Picker, n, picks int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 1))
	c := make([]int, n)
	for range picks {
		i := p.Pick(rng.Uint64())
		require.GreaterOrEqual(t, i, 0)
		c[i]++
	}
	return c
}

func TestWeightedRandomFollowsWeights(t *testing.T) {
	for _, w := range [][]float64{{100, 50, 25, 5}, {100, 95, 90, 85}, {1}, {3, 0, 1, 0}, {0.001, 1000}} {
		p, err := NewPicker(WeightedRandom, w, Inputs{})
		require.NoError(t, err)
		const picks = 400_000
		c := counts(t, p, len(w), picks, 7)
		sum := 0.0
		for _, x := range w {
			sum += x
		}
		for i, x := range w {
			want := picks * x / sum
			// 5 standard deviations of a binomial count.
			tol := 5*math.Sqrt(want*(1-x/sum)) + 1
			assert.InDelta(t, want, float64(c[i]), tol, "weights %v upstream %d", w, i)
			if x == 0 {
				assert.Zero(t, c[i], "a drained upstream was picked")
			}
		}
	}
}

func TestSmoothWRRIsExactAndSpread(t *testing.T) {
	p, err := NewPicker(SmoothWRR, []float64{5, 1, 1}, Inputs{})
	require.NoError(t, err)
	var seq []int
	for range 7 {
		seq = append(seq, p.Pick(0))
	}
	// nginx's documented sequence for weights 5,1,1.
	assert.Equal(t, []int{0, 0, 1, 0, 2, 0, 0}, seq)

	for _, w := range [][]float64{{100, 50, 25, 5}, {100, 95, 90, 85}} {
		p, err := NewPicker(SmoothWRR, w, Inputs{})
		require.NoError(t, err)
		c := counts(t, p, len(w), 10_000, 1)
		// Exact within one round of the weights' sum.
		sum := 0.0
		for _, x := range w {
			sum += x
		}
		for i, x := range w {
			assert.InDelta(t, 10_000*x/sum, float64(c[i]), x, "weights %v: %v", w, c)
		}
	}
}

// nginxSWRR is nginx's own loop (ngx_http_upstream_get_peer), the
// reference smoothWRR must agree with.
func nginxSWRR(w []float64) func() int {
	cur := make([]float64, len(w))
	return func() int {
		best, total := -1, 0.0
		for i, x := range w {
			if x == 0 {
				continue
			}
			cur[i] += x
			total += x
			if best < 0 || cur[i] > cur[best] {
				best = i
			}
		}
		if best >= 0 {
			cur[best] -= total
		}
		return best
	}
}

// smoothWRR keeps a heap per distinct weight rather than scanning every
// upstream; with integer weights (exact in floats) its sequence is
// nginx's, pick for pick, over many rounds — few weights shared by many
// upstreams, as lb-sim's capacities, and all weights distinct.
func TestSmoothWRRFollowsNginxPickForPick(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 1))
	for trial := range 300 {
		n := 1 + rng.IntN(40)
		levels := 1 + rng.IntN(6)
		w := make([]float64, n)
		for i := range w {
			w[i] = float64(rng.IntN(levels)) * float64(1+trial%5)
		}
		p, err := NewPicker(SmoothWRR, w, Inputs{})
		require.NoError(t, err)
		ref := nginxSWRR(w)
		for k := range 3000 {
			want := ref()
			if got := p.Pick(0); got != want {
				t.Fatalf("weights %v: pick %d is %d, nginx's %d", w, k, got, want)
			}
		}
	}
}

// Weights that do not add up exactly in floats: each upstream still gets
// its share within one of its own weight, however many rounds go by.
func TestSmoothWRRStaysExactWithFractionalWeights(t *testing.T) {
	w := []float64{0.1, 0.7, 0.7, 1.3, 0.1, 2.9, 0.7}
	p, err := NewPicker(SmoothWRR, w, Inputs{})
	require.NoError(t, err)
	sum := 0.0
	for _, x := range w {
		sum += x
	}
	c := make([]int, len(w))
	for k := 1; k <= 200_000; k++ {
		c[p.Pick(0)]++
		if k%9973 == 0 {
			for i, x := range w {
				require.InDelta(t, float64(k)*x/sum, float64(c[i]), 1+x, "after %d picks: %v", k, c)
			}
		}
	}
}

func TestRoundRobinSkipsDrained(t *testing.T) {
	p, err := NewPicker(RoundRobin, []float64{1, 0, 7}, Inputs{})
	require.NoError(t, err)
	c := counts(t, p, 3, 1000, 1)
	assert.Equal(t, []int{500, 0, 500}, c)
}

func TestLoadAwarePickers(t *testing.T) {
	load := Inputs{Loads: withActive(5, 0, 2, 9)}
	lc, err := NewPicker(LeastConn, []float64{1, 1, 1, 1}, load)
	require.NoError(t, err)
	assert.Equal(t, 1, lc.Pick(12345))
	// Drained upstream 1 is never chosen even when idle.
	lc, err = NewPicker(LeastConn, []float64{1, 0, 1, 1}, load)
	require.NoError(t, err)
	assert.Equal(t, 2, lc.Pick(99))

	p, err := NewPicker(P2C, []float64{1, 1, 1, 1}, load)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 3))
	for range 1000 {
		i := p.Pick(rng.Uint64())
		assert.NotEqual(t, 3, i, "p2c chose the most loaded upstream, which loses every pair")
	}
	_, err = NewPicker(P2C, []float64{1}, Inputs{Loads: NewLoads(2)})
	assert.ErrorContains(t, err, "2 loads for 1 upstreams")
}

func TestPickerRejectsBadWeights(t *testing.T) {
	for _, w := range [][]float64{{1, math.NaN()}, {-1, 2}, {math.Inf(1)}} {
		_, err := NewPicker(WeightedRandom, w, Inputs{})
		assert.ErrorContains(t, err, "must be a finite number")
	}
	for _, algo := range Algorithms {
		_, err := NewPicker(algo, []float64{math.MaxFloat64, 1, math.MaxFloat64}, Inputs{})
		assert.ErrorContains(t, err, "sum past the largest float64", algo)
		// Near the limit but summable: every picker still spreads.
		p, err := NewPicker(algo, []float64{math.MaxFloat64 / 4, math.MaxFloat64 / 4}, Inputs{})
		require.NoError(t, err, algo)
		c := counts(t, p, 2, 200, 1)
		assert.Positive(t, c[0], algo)
		assert.Positive(t, c[1], algo)
	}
	_, err := NewPicker("fastest", []float64{1}, Inputs{})
	assert.ErrorContains(t, err, "want one of")
	for _, algo := range Algorithms {
		p, err := NewPicker(algo, []float64{0, 0}, Inputs{})
		require.NoError(t, err)
		assert.Equal(t, -1, p.Pick(1), algo)
	}
}

// BenchmarkPick reports picks per second on one goroutine, the clock
// moving 1 µs per pick. The learning pickers are fed once beforehand —
// latencies for p2c-ewma, load reports for wrr-reports, a full probe pool
// that does not drain for prequal — so this is the pick alone; see
// BenchmarkLearn for picks with their observations.
func BenchmarkPick(b *testing.B) {
	benchPickers(b, false)
}

// BenchmarkLearn is BenchmarkPick in steady state: p2c-ewma observes a
// latency per pick, wrr-reports gets a load report per pick, prequal takes
// its probes and gets one answer per pick.
func BenchmarkLearn(b *testing.B) {
	benchPickers(b, true)
}

func benchPickers(b *testing.B, learn bool) {
	w := []float64{100, 50, 25, 5, 80, 60, 40, 20}
	for _, algo := range Algorithms {
		b.Run(algo, func(b *testing.B) {
			c := &clock{}
			loads := NewLoads(len(w))
			tune := Tuning{}
			if !learn {
				tune = Tuning{Reuse: 1 << 40, MaxProbeAge: time.Hour}
			}
			p, err := NewPicker(algo, w, Inputs{Loads: loads, Now: c.Now, Tuning: tune})
			require.NoError(b, err)
			obs, _ := p.(Observer)
			pr, _ := p.(Prober)
			_, wrr := p.(*loadReportWRR)
			for i := range w {
				loads[i].Active.Store(int64(i % 3))
				loads[i].Observe(0, time.Duration(i+1)*time.Millisecond, false, time.Second, time.Second)
				loads[i].Reported(0, LoadReport{QPS: 100, Utilization: float64(i+1) / 10}, 1, time.Hour)
				if pr != nil {
					pr.Probed(i, int64(i%4), time.Duration(i+1)*time.Millisecond)
				}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var probes [16]int
			sink := 0
			for b.Loop() {
				c.now += time.Microsecond
				rnd := rng.Uint64()
				i := p.Pick(rnd)
				sink += i
				switch {
				case !learn:
				case obs != nil:
					obs.Observe(i, time.Duration(rnd>>50), false)
				case pr != nil:
					pr.TakeProbes(probes[:0], rnd)
					pr.Probed(int(rnd>>61), int64(rnd>>58&7), time.Duration(rnd>>50))
				case wrr:
					loads[i].Reported(c.now, LoadReport{QPS: 100, Utilization: float64(i+1) / 10}, 1, time.Minute)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "picks/s")
			_ = sink
		})
	}
}

func withActive(active ...int64) []*Load {
	loads := NewLoads(len(active))
	for i, a := range active {
		loads[i].Active.Store(a)
	}
	return loads
}
