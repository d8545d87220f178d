package sim

import (
	"math/rand/v2"
	"time"
)

// Delay draws the one-way delay of a message from node from to node to.
type Delay func(r *rand.Rand, from, to int) time.Duration

// Constant delays every message by d.
func Constant(d time.Duration) Delay {
	return func(*rand.Rand, int, int) time.Duration { return d }
}

// Uniform draws every delay uniformly from [min, max].
func Uniform(min, max time.Duration) Delay {
	if max <= min {
		return Constant(min)
	}
	return func(r *rand.Rand, _, _ int) time.Duration {
		return min + time.Duration(r.Int64N(int64(max-min)+1))
	}
}

// PerLink gives each directed link a fixed base delay in [min, max], derived
// from salt and the link's endpoints (so it costs no memory on large rings),
// plus per-message exponential jitter with mean jitter — links differ the way
// real paths do, and a message occasionally straggles.
func PerLink(salt uint64, min, max, jitter time.Duration) Delay {
	span := uint64(max - min)
	return func(r *rand.Rand, from, to int) time.Duration {
		d := min
		if span > 0 {
			d += time.Duration(mix(salt^uint64(from)<<32^uint64(to)) % (span + 1))
		}
		if jitter > 0 {
			d += time.Duration(r.ExpFloat64() * float64(jitter))
		}
		return d
	}
}

// mix is splitmix64's finaliser: a cheap, well-spread hash.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
