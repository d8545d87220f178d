package sim

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/ring"
)

// The conformance suite: what every registered election algorithm
// promises (docs/election-algorithms.md). It ranges over the registry, so
// an algorithm registered in ring's init that breaks a promise fails make
// test.

// sent is one message a node sent, as the trace saw it.
type sent struct {
	At   time.Duration
	From int
	Msg  ring.Message
}

// conformanceRun is one election of alg on order, with its trace.
type conformanceRun struct {
	sim   *Sim
	trace []sent
}

const (
	confDelayMin = time.Millisecond
	confDelayMax = 3 * time.Millisecond
)

func runElection(t *testing.T, alg ring.Algorithm, order []ring.UID, initiators []int, seed uint64, loss float64, node ring.Config) conformanceRun {
	t.Helper()
	r, err := ring.NewRing(order)
	require.NoError(t, err)
	var run conformanceRun
	run.sim, err = New(Config{Ring: r, Seed: seed, Loss: loss, Algorithm: alg, Node: node,
		Delay: Uniform(confDelayMin, confDelayMax),
		Trace: func(at time.Duration, from int, m ring.Message) { run.trace = append(run.trace, sent{at, from, m}) }})
	require.NoError(t, err)
	for _, i := range initiators {
		run.sim.Start(i, 0)
	}
	return run
}

// confCase is a ring and who starts.
type confCase struct {
	order      []ring.UID
	initiators []int
	what       string
}

// confCases draws the rings of the suite: every order, one, all and a
// random set of initiators, over sizes that are and are not powers of two.
func confCases(seed uint64) []confCase {
	rng := rand.New(rand.NewPCG(seed, 7))
	var out []confCase
	for _, n := range []int{1, 2, 3, 5, 8, 13, 32, 33, 100} {
		for _, o := range Orders {
			order, _ := Arrange(UIDs(n), o, rng)
			all := rng.Perm(n)
			some := all[:1+rng.IntN(n)]
			for _, in := range []struct {
				name string
				who  []int
			}{{"one", all[:1]}, {"all", all}, {"some", some}} {
				out = append(out, confCase{order, in.who, fmt.Sprintf("n=%d %s, %s initiate", n, o, in.name)})
			}
		}
	}
	return out
}

func TestConformance(t *testing.T) {
	for _, alg := range ring.Algorithms() {
		t.Run(alg.Name, func(t *testing.T) {
			t.Parallel()
			for seed := uint64(1); seed <= 3; seed++ {
				for _, c := range confCases(seed) {
					checkFaultFree(t, alg, c, seed)
				}
			}
		})
	}
}

// checkFaultFree runs one election without faults and holds it to every
// promise: one leader, the maximum; within the declared bound of election
// messages and the declared horizon; messages only to ring neighbours (for
// a ring algorithm); and the same trace again from the same seed.
func checkFaultFree(t *testing.T, alg ring.Algorithm, c confCase, seed uint64) {
	n := len(c.order)
	// HopBound is the slowest hop: an election that outlives its Horizon
	// restarts, and the suite demands none does.
	node := ring.Config{HopBound: confDelayMax}
	run := runElection(t, alg, c.order, c.initiators, seed, 0, node)
	run.sim.Run(time.Duration(1<<62 - 1))
	s := run.sim
	maxUID, _ := ring.MaxUID(c.order)

	o := s.Outcome()
	require.True(t, o.Agreed && o.IsMaxLive, "%s seed %d: one leader, the max: got %+v", c.what, seed, o)
	leaders := 0
	for i := range n {
		if l, _ := s.Node(i).Leader(); l == c.order[i] {
			leaders++
		}
		st := s.Node(i).Stats()
		require.Zero(t, st.Restarts, "%s seed %d: node %d restarted: the election outlived Horizon(%d)=%d hops", c.what, seed, i, n, alg.Horizon(n))
		require.Zero(t, st.Challenges, "%s seed %d: node %d challenged a smaller leader", c.what, seed, i)
	}
	require.Equal(t, 1, leaders, "%s seed %d: exactly one node leads", c.what, seed)
	if n > 1 {
		done := s.Completions()
		require.Len(t, done, 1, "%s seed %d: one completed election", c.what, seed)
		require.Equal(t, maxUID, done[0].Leader)
		require.LessOrEqual(t, done[0].At, time.Duration(alg.Horizon(n))*confDelayMax, "%s seed %d: within the horizon", c.what, seed)
	}

	elections := s.Counts().Of(ring.MsgElection)
	require.LessOrEqual(t, elections, alg.Bound(n), "%s seed %d: %d election messages exceed the bound %s = %d",
		c.what, seed, elections, alg.BoundText, alg.Bound(n))

	for _, m := range run.trace {
		if m.Msg.Type == ring.MsgHeartbeat || alg.Topology == ring.Complete {
			continue
		}
		next, prev := c.order[(m.From+1)%n], c.order[(m.From+n-1)%n]
		switch {
		case m.Msg.Ack || m.Msg.Type == ring.MsgElected:
			require.Contains(t, []ring.UID{next, prev}, m.Msg.To, "%s: a ring algorithm sends only to its neighbours", c.what)
		case alg.Topology == ring.Unidirectional:
			require.Equal(t, next, m.Msg.To, "%s: a unidirectional algorithm sends only to its successor: %+v", c.what, m.Msg)
		default:
			require.Contains(t, []ring.UID{next, prev}, m.Msg.To, "%s: a bidirectional algorithm sends only to its neighbours: %+v", c.what, m.Msg)
		}
	}

	again := runElection(t, alg, c.order, c.initiators, seed, 0, node)
	again.sim.Run(time.Duration(1<<62 - 1))
	require.Equal(t, run.trace, again.trace, "%s seed %d: the same seed gives the same messages", c.what, seed)
}

// Under 10 % loss with per-hop acknowledgement, an election settles on the
// maximum within its horizon, counted in hops of at most every try timing
// out. With retries enough that a hop never gives up in practice (8: a
// try fails with p ≈ 0.19, nine in a row ≈ 3·10⁻⁷) it does so within one
// horizon; with the default 3, a hop now and then gives a live neighbour
// up for down, and the restart that repairs it may take a few horizons.
func TestConformanceUnderLoss(t *testing.T) {
	const (
		loss = 0.10
		ack  = 2*confDelayMax + time.Millisecond
	)
	for _, alg := range ring.Algorithms() {
		t.Run(alg.Name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(99, 1))
			resent := 0
			for seed := uint64(1); seed <= 80; seed++ {
				n := []int{3, 5, 8, 16}[seed%4]
				order, err := Arrange(UIDs(n), OrderRandom, rng)
				require.NoError(t, err)
				retries, horizons := 8, 1
				if seed%2 == 0 {
					retries, horizons = 3, 5
				}
				node := ring.Config{AckTimeout: ack, Retries: retries, HopBound: time.Duration(retries+1) * ack}
				run := runElection(t, alg, order, rng.Perm(n)[:1+rng.IntN(n)], seed, loss, node)
				horizon := time.Duration(horizons*alg.Horizon(n)) * node.HopBound
				run.sim.Run(horizon)
				o := run.sim.Outcome()
				require.True(t, o.Agreed && o.IsMaxLive, "n=%d seed %d retries %d: not settled on the max within %d horizons (%s): %+v",
					n, seed, retries, horizons, horizon, o)
				resent += run.sim.Counts().Retransmissions
			}
			assert.Positive(t, resent, "the loss must have cost retransmissions")
		})
	}
}

// LeLann's count is exact: n² election messages, whoever starts (none for
// a member alone).
func TestLeLannExactlyNSquared(t *testing.T) {
	alg, err := ring.Lookup("lelann")
	require.NoError(t, err)
	for seed := uint64(1); seed <= 2; seed++ {
		for _, c := range confCases(seed) {
			res, err := ElectWith(alg, c.order, c.initiators, seed, Uniform(confDelayMin, confDelayMax), ring.Config{})
			require.NoError(t, err)
			n := len(c.order)
			if n == 1 {
				n = 0
			}
			require.Equal(t, n*n, res.Counts.Of(ring.MsgElection), c.what)
		}
	}
}

func TestRegistry(t *testing.T) {
	names := ring.AlgorithmNames()
	require.Equal(t, ring.ChangRoberts, names[0], "Chang–Roberts comes first")
	for _, want := range []string{"lelann", "hirschberg-sinclair", "franklin", "dkr", "bully"} {
		require.Contains(t, names, want)
	}
	_, err := ring.Lookup("raft")
	require.ErrorContains(t, err, `"raft"`)
	require.ErrorContains(t, err, "chang-roberts")
	assert.Panics(t, func() { ring.Register(ring.Algorithm{Name: "lelann"}) }, "an incomplete entry")
	assert.Panics(t, func() {
		ring.Register(ring.Algorithm{Name: ring.ChangRoberts, Source: "x", Bound: func(int) int { return 0 }, BoundText: "0", Core: ring.NewLeLann})
	}, "a duplicate name")
}

// A coordinator crash in a ring of ringnode servers (the election beside
// the coordinator role, heartbeats and the failure detector): one new
// election, won by the max live UID, which alone takes the role over — no
// member keeps suspecting the crashed one and starts another round.
func TestConformanceFailover(t *testing.T) {
	for _, alg := range ring.Algorithms() {
		t.Run(alg.Name, func(t *testing.T) {
			t.Parallel()
			for seed := uint64(1); seed <= 5; seed++ {
				c := DefaultFailover
				c.Algorithm, c.N = alg, []int{3, 8, 16}[seed%3]
				res, err := Failover(c, seed)
				require.NoError(t, err)
				require.True(t, res.NewIsMaxLive, "seed %d: %+v", seed, res)
				require.Equal(t, 1, res.Coordinators, "seed %d: one coordinator", seed)
				require.Positive(t, res.Metadata, "seed %d: every survivor holds the new metadata", seed)
				require.LessOrEqual(t, res.Counts.Of(ring.MsgElected), c.N-1, "seed %d: one announcement among the %d survivors", seed, c.N-1)
			}
		})
	}
}
