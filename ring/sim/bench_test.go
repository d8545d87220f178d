package sim

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/ringside/ringside/ring"
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

// BenchmarkAlgorithms is one all-initiator election of every algorithm
// at n = 1,024 on a random ring, with per-hop acknowledgement as
// ring-messages runs it: its time, allocations and messages. The
// quadratic ones (LeLann, Bully) are what ring-messages spends its
// minute on.
func BenchmarkAlgorithms(b *testing.B) {
	order, _ := Arrange(UIDs(1024), OrderRandom, rand.New(rand.NewPCG(1, 1)))
	all := make([]int, len(order))
	for i := range all {
		all[i] = i
	}
	for _, name := range ring.AlgorithmNames() {
		alg, err := ring.Lookup(name)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			msgs := 0
			for i := 0; b.Loop(); i++ {
				res, err := ElectWith(alg, order, all, uint64(i), Uniform(time.Millisecond, 3*time.Millisecond), ring.Config{AckTimeout: 10 * time.Millisecond})
				if err != nil {
					b.Fatal(err)
				}
				msgs += res.Counts.Total()
			}
			b.ReportMetric(float64(msgs)/float64(b.N), "msgs/op")
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
