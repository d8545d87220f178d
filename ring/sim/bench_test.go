package sim

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// BenchmarkElection reports simulated messages per second for an
// all-initiator election on a random ring.
func BenchmarkElection(b *testing.B) {
	for _, n := range []int{128, 1024} {
		b.Run("n="+itoa(n), func(b *testing.B) {
			order, _ := Arrange(UIDs(n), OrderRandom, rand.New(rand.NewPCG(1, 1)))
			all := make([]int, n)
			for i := range all {
				all[i] = i
			}
			msgs := 0
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				res, err := Elect(order, all, uint64(i), Uniform(time.Millisecond, 3*time.Millisecond))
				if err != nil {
					b.Fatal(err)
				}
				msgs += res.Counts.Total()
			}
			b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkChaos is one ring-chaos seed with the default fault mix.
func BenchmarkChaos(b *testing.B) {
	msgs := 0
	for i := 0; b.Loop(); i++ {
		res, err := Chaos(DefaultChaos, uint64(i))
		if err != nil {
			b.Fatal(err)
		}
		msgs += res.Counts.Total()
	}
	b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
}

func itoa(n int) string { return strconv.Itoa(n) }
