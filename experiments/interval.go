package experiments

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// A ratio of two algorithms' mean latencies, pooled over a run, moves a
// great deal between runs of one binary (kube-election-latency's
// bld-optimistic / default read 1.13 and 1.42 in two runs of ten
// repetitions): a verdict on one such number says more about the run than
// about the algorithm. RatioInterval puts a bootstrap interval around it,
// and JudgeInterval states the verdict only when the interval is on one
// side of the target.

// bootstrapRounds resamples per interval: enough for stable 2.5 % and
// 97.5 % percentiles, quick beside a report's plots.
const bootstrapRounds = 4000

// minGroups is the fewest groups an interval is drawn from: resampling
// fewer gives an interval narrower than what it rests on (one group's
// resamples are all that group).
const minGroups = 5

// RatioInterval is the ratio of num's mean to den's over every value of
// every group, and the percentile bootstrap's 95 % interval for it from
// resampling whole groups with replacement. A group is one unit of the
// run that measured both sides together (one repetition of one cell, its
// algorithms side by side), so a slow moment of the machine moves both.
// The resampling is seeded: one table always gives one report. NaN values
// are left out; the ratio and its bounds are NaN without values on either
// side, the bounds also with fewer than minGroups groups.
func RatioInterval(num, den [][]float64, seed uint64) (ratio, lo, hi float64) {
	type sums struct{ sum, count float64 }
	var groups [][2]sums // per group: num's and den's
	var all [2]sums
	for i := range min(len(num), len(den)) {
		var g [2]sums
		for side, xs := range [2][]float64{num[i], den[i]} {
			for _, x := range xs {
				if !math.IsNaN(x) {
					g[side].sum += x
					g[side].count++
				}
			}
			all[side].sum += g[side].sum
			all[side].count += g[side].count
		}
		groups = append(groups, g)
	}
	nan := math.NaN()
	ratioOf := func(s [2]sums) float64 {
		if s[0].count == 0 || s[1].count == 0 || s[1].sum == 0 {
			return nan
		}
		return (s[0].sum / s[0].count) / (s[1].sum / s[1].count)
	}
	if ratio = ratioOf(all); math.IsNaN(ratio) {
		return nan, nan, nan
	}
	if len(groups) < minGroups {
		return ratio, nan, nan
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var rs []float64
	for range bootstrapRounds {
		var s [2]sums
		for range groups {
			g := groups[rng.IntN(len(groups))]
			for side := range 2 {
				s[side].sum += g[side].sum
				s[side].count += g[side].count
			}
		}
		if r := ratioOf(s); !math.IsNaN(r) {
			rs = append(rs, r)
		}
	}
	lo, hi = percentiles95(rs)
	return ratio, lo, hi
}

// JudgeInterval states whether a target holds for a value known within
// the interval lo–hi: met when every value in it meets the target, missed
// when none does, otherwise inconclusive — always with the interval.
// atMost is the target's bound on the value (a ratio ≤ atMost).
func JudgeInterval(lo, hi, atMost float64) string {
	iv := fmt.Sprintf("95 %% interval %s–%s", Num(lo, 2), Num(hi, 2))
	switch {
	case math.IsNaN(lo) || math.IsNaN(hi):
		return "inconclusive (no interval: too few repetitions)"
	case hi <= atMost:
		return "met (" + iv + ")"
	case lo > atMost:
		return "**missed** (" + iv + ")"
	}
	return "inconclusive (" + iv + ")"
}

// MedianRatioInterval is the ratio of a's median to b's over all their
// values, with the percentile bootstrap's 95 % interval from resampling
// each side's groups whole, with replacement, each side on its own (two
// independent measurements: a ring's election rounds and a bare ring's
// trips, say). A group is what shares its conditions — one bare ring's
// trips share where its processes landed on the cores, so resampling the
// trips one by one would take its rings for many and draw the interval too
// narrow; a value measured on its own is a group of one. Seeded like
// RatioInterval; NaN values are left out; the bounds are NaN when either
// side has fewer than minGroups groups with a value.
func MedianRatioInterval(a, b [][]float64, seed uint64) (ratio, lo, hi float64) {
	a, b = groupsWithoutNaN(a), groupsWithoutNaN(b)
	nan := math.NaN()
	if len(a) == 0 || len(b) == 0 {
		return nan, nan, nan
	}
	// median sorts xs in place: it is given scratch (resample) or copies
	// (slices.Concat).
	median := func(xs []float64) float64 {
		sort.Float64s(xs)
		return Quantile(xs, 0.5)
	}
	ratio = median(slices.Concat(a...)) / median(slices.Concat(b...))
	if len(a) < minGroups || len(b) < minGroups {
		return ratio, nan, nan
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	resample := func(groups [][]float64, into []float64) []float64 {
		into = into[:0]
		for range groups {
			into = append(into, groups[rng.IntN(len(groups))]...)
		}
		return into
	}
	var ra, rb []float64
	rs := make([]float64, 0, bootstrapRounds)
	for range bootstrapRounds {
		ra, rb = resample(a, ra), resample(b, rb)
		if mb := median(rb); mb != 0 {
			rs = append(rs, median(ra)/mb)
		}
	}
	lo, hi = percentiles95(rs)
	return ratio, lo, hi
}

// Singletons makes each value a group of its own, for MedianRatioInterval's
// side whose values were each measured apart.
func Singletons(xs []float64) [][]float64 {
	out := make([][]float64, len(xs))
	for i, x := range xs {
		out[i] = []float64{x}
	}
	return out
}

// percentiles95 are the 2.5 % and 97.5 % percentiles of the resampled
// ratios rs (sorted in place), NaN when there are none.
func percentiles95(rs []float64) (lo, hi float64) {
	if len(rs) == 0 {
		return math.NaN(), math.NaN()
	}
	sort.Float64s(rs)
	return Quantile(rs, 0.025), Quantile(rs, 0.975)
}

// withoutNaN is xs without its NaN values, in a new slice.
func withoutNaN(xs []float64) []float64 {
	var out []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			out = append(out, x)
		}
	}
	return out
}

// groupsWithoutNaN is groups without their NaN values and without the
// groups that leaves empty, in new slices.
func groupsWithoutNaN(groups [][]float64) [][]float64 {
	var out [][]float64
	for _, g := range groups {
		if kept := withoutNaN(g); len(kept) > 0 {
			out = append(out, kept)
		}
	}
	return out
}
