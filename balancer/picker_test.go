package balancer

import (
	"math"
	"math/rand/v2"
	"testing"

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
		p, err := NewPicker(WeightedRandom, w, nil)
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
			assert.InDelta(t, want, float64(c[i]), tol, "weights %v backend %d", w, i)
			if x == 0 {
				assert.Zero(t, c[i], "a drained backend was picked")
			}
		}
	}
}

func TestSmoothWRRIsExactAndSpread(t *testing.T) {
	p, err := NewPicker(SmoothWRR, []float64{5, 1, 1}, nil)
	require.NoError(t, err)
	var seq []int
	for range 7 {
		seq = append(seq, p.Pick(0))
	}
	// nginx's documented sequence for weights 5,1,1.
	assert.Equal(t, []int{0, 0, 1, 0, 2, 0, 0}, seq)

	for _, w := range [][]float64{{100, 50, 25, 5}, {100, 95, 90, 85}} {
		p, err := NewPicker(SmoothWRR, w, nil)
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

func TestRoundRobinSkipsDrained(t *testing.T) {
	p, err := NewPicker(RoundRobin, []float64{1, 0, 7}, nil)
	require.NoError(t, err)
	c := counts(t, p, 3, 1000, 1)
	assert.Equal(t, []int{500, 0, 500}, c)
}

func TestLoadAwarePickers(t *testing.T) {
	active := []int64{5, 0, 2, 9}
	load := func(i int) int64 { return active[i] }
	lc, err := NewPicker(LeastConn, []float64{1, 1, 1, 1}, load)
	require.NoError(t, err)
	assert.Equal(t, 1, lc.Pick(12345))
	// Drained backend 1 is never chosen even when idle.
	lc, err = NewPicker(LeastConn, []float64{1, 0, 1, 1}, load)
	require.NoError(t, err)
	assert.Equal(t, 2, lc.Pick(99))

	p, err := NewPicker(P2C, []float64{1, 1, 1, 1}, load)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 3))
	for range 1000 {
		i := p.Pick(rng.Uint64())
		assert.NotEqual(t, 3, i, "p2c chose the most loaded backend, which loses every pair")
	}
	_, err = NewPicker(P2C, []float64{1}, nil)
	assert.ErrorContains(t, err, "active connection counts")
}

func TestPickerRejectsBadWeights(t *testing.T) {
	for _, w := range [][]float64{{1, math.NaN()}, {-1, 2}, {math.Inf(1)}} {
		_, err := NewPicker(WeightedRandom, w, nil)
		assert.ErrorContains(t, err, "must be a finite number")
	}
	_, err := NewPicker("fastest", []float64{1}, nil)
	assert.ErrorContains(t, err, "want one of")
	for _, algo := range Algorithms {
		p, err := NewPicker(algo, []float64{0, 0}, func(int) int64 { return 0 })
		require.NoError(t, err)
		assert.Equal(t, -1, p.Pick(1), algo)
	}
}

// BenchmarkPick reports picks per second on one goroutine.
func BenchmarkPick(b *testing.B) {
	w := []float64{100, 50, 25, 5, 80, 60, 40, 20}
	for _, algo := range Algorithms {
		b.Run(algo, func(b *testing.B) {
			p, err := NewPicker(algo, w, func(int) int64 { return 0 })
			require.NoError(b, err)
			rng := rand.New(rand.NewPCG(1, 2))
			sink := 0
			for b.Loop() {
				sink += p.Pick(rng.Uint64())
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "picks/s")
			_ = sink
		})
	}
}
