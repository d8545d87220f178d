package experiments

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// groups draws n groups of k values around mean with the given spread.
func groups(rng *rand.Rand, n, k int, mean, spread float64) [][]float64 {
	out := make([][]float64, n)
	for i := range out {
		for range k {
			out[i] = append(out[i], mean+spread*(rng.Float64()*2-1))
		}
	}
	return out
}

func TestRatioIntervalBracketsTheRatioAndJudgesByIt(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	den := groups(rng, 15, 5, 20, 4)
	tight := groups(rng, 15, 5, 30, 4) // 1.5 × den
	r, lo, hi := RatioInterval(tight, den, 7)
	assert.InDelta(t, 1.5, r, 0.08)
	assert.Less(t, lo, r)
	assert.Greater(t, hi, r)
	assert.Less(t, hi-lo, 0.3, "15 groups of low spread give a narrow interval")
	assert.Equal(t, "**missed** (95 % interval "+Num(lo, 2)+"–"+Num(hi, 2)+")", JudgeInterval(lo, hi, 1.2))
	assert.Contains(t, JudgeInterval(lo, hi, 2), "met (")

	// The same mean ratio, every group's values spread wide: the interval
	// straddles a target near it and the verdict says so.
	wide := groups(rng, 15, 5, 24, 20) // 1.2 × den on average
	_, lo, hi = RatioInterval(wide, den, 7)
	assert.Less(t, lo, 1.2)
	assert.Greater(t, hi, 1.2)
	assert.Contains(t, JudgeInterval(lo, hi, 1.2), "inconclusive (95 % interval")

	// Seeded: one table, one report.
	r2, lo2, hi2 := RatioInterval(wide, den, 7)
	_, lo3, hi3 := RatioInterval(wide, den, 7)
	assert.Equal(t, [2]float64{lo2, hi2}, [2]float64{lo3, hi3})
	assert.False(t, math.IsNaN(r2))
}

func TestRatioIntervalNeedsGroupsAndValues(t *testing.T) {
	one := [][]float64{{2, 2, 2}}
	r, lo, hi := RatioInterval(one, [][]float64{{1, 1}}, 1)
	assert.Equal(t, 2.0, r, "the ratio is known")
	assert.True(t, math.IsNaN(lo) && math.IsNaN(hi), "one group is no interval")
	assert.Contains(t, JudgeInterval(lo, hi, 1.2), "inconclusive (no interval")

	nan := math.NaN()
	r, lo, _ = RatioInterval([][]float64{{nan}, {nan}}, [][]float64{{1}, {1}}, 1)
	assert.True(t, math.IsNaN(r) && math.IsNaN(lo), "no numerator values")
	r, _, _ = RatioInterval([][]float64{{1, nan}, {3}}, [][]float64{{1}, {1, nan}}, 1)
	assert.Equal(t, 2.0, r, "NaN values are left out: mean 2 over mean 1")
	r, _, _ = RatioInterval([][]float64{{1}}, [][]float64{{0}}, 1)
	assert.True(t, math.IsNaN(r), "a zero denominator gives no ratio")
}

func TestMedianRatioInterval(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var a, b []float64
	for range 40 {
		a = append(a, 90+20*rng.Float64()) // median ≈ 100
		b = append(b, 45+10*rng.Float64()) // median ≈ 50
	}
	r, lo, hi := MedianRatioInterval(Singletons(a), Singletons(b), 1)
	assert.InDelta(t, 2, r, 0.15)
	assert.True(t, lo < r && r < hi, "%v in %v–%v", r, lo, hi)
	assert.Contains(t, JudgeInterval(lo, hi, 2), "inconclusive", "a ratio of 2 against a bound of 2")
	assert.Contains(t, JudgeInterval(lo, hi, 3), "met")
	_, lo2, hi2 := MedianRatioInterval(Singletons(a), Singletons(b), 1)
	assert.Equal(t, [2]float64{lo, hi}, [2]float64{lo2, hi2}, "seeded")

	r, lo, _ = MedianRatioInterval(Singletons([]float64{4, math.NaN(), 4}), Singletons([]float64{2, 2, 2, 2, 2}), 1)
	assert.Equal(t, 2.0, r, "NaN left out")
	assert.True(t, math.IsNaN(lo), "two values are no interval")
	r, _, _ = MedianRatioInterval(nil, Singletons(b), 1)
	assert.True(t, math.IsNaN(r))
	r, lo, _ = MedianRatioInterval(Singletons([]float64{6, 6, 6, 6, 6}), [][]float64{{1, 2}, {math.NaN()}, {3}, {4}, {5}}, 1)
	assert.Equal(t, 2.0, r, "the median over every group's values")
	assert.True(t, math.IsNaN(lo), "a group of NaN is no group: four are too few")
}

// Ten rings of twenty trips each, whose hops differ from ring to ring far
// more than within one: resampled whole, the rings give the interval their
// spread; taken one trip at a time, 200 trips would pretend to pin the
// median down.
func TestMedianRatioIntervalResamplesGroupsWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var rounds []float64
	for range 16 {
		rounds = append(rounds, 48+4*rng.Float64())
	}
	var rings [][]float64
	for i := range 10 {
		level := 15 + 2*float64(i) // the rings' p50s: 15–33 µs
		var trips []float64
		for range 20 {
			trips = append(trips, level+rng.Float64())
		}
		rings = append(rings, trips)
	}
	r, lo, hi := MedianRatioInterval(Singletons(rounds), rings, 1)
	_, tlo, thi := MedianRatioInterval(Singletons(rounds), Singletons(slices.Concat(rings...)), 1)
	assert.InDelta(t, 2, r, 0.2)
	assert.Greater(t, hi-lo, 2*(thi-tlo), "rings %v–%v against trips %v–%v", lo, hi, tlo, thi)
	assert.Contains(t, JudgeInterval(lo, hi, 2), "inconclusive", "the rings' spread leaves 2 open: %v–%v", lo, hi)
}
