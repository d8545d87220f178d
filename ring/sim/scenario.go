package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/ringside/ringside/ring"
)

// Ring orders a simulated ring can have.
const (
	OrderSorted  = "sorted"  // consistent-hash ring: ascending UIDs, Chang–Roberts' best case
	OrderReverse = "reverse" // descending UIDs: the worst case
	OrderRandom  = "random"  // a uniformly random permutation
)

// Orders lists the ring orders, for flag validation.
var Orders = []string{OrderSorted, OrderRandom, OrderReverse}

// Addr is the address of simulated server i, the one its UID hashes.
func Addr(i int) string { return "127.0.0.1:" + strconv.Itoa(7000+i) }

// UIDs returns the UIDs of n servers listening on 127.0.0.1:7000, 7001, …
func UIDs(n int) []ring.UID {
	out := make([]ring.UID, n)
	for i := range out {
		out[i] = ring.UIDOf(Addr(i))
	}
	return out
}

// Arrange returns uids in the named ring order.
func Arrange(uids []ring.UID, order string, r *rand.Rand) ([]ring.UID, error) {
	out := ring.SortedRing(uids)
	switch order {
	case OrderSorted:
	case OrderReverse:
		slices.Reverse(out)
	case OrderRandom:
		r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	default:
		return nil, fmt.Errorf("ring order %q: want one of %v", order, Orders)
	}
	return out, nil
}

// ElectionResult is what one election run measured.
type ElectionResult struct {
	Counts      Counts
	Leader      ring.UID
	LeaderIsMax bool
	// Done is when the election ended: every member knows the leader
	// (for a ring, the winner saw its announcement return).
	Done time.Duration
	// MaxDistance is the hop distance from the first initiator to the max
	// UID — the d of the single-initiator formula n + d.
	MaxDistance int
	// Challenges is the nodes' ring.Stats.Challenges summed: elections
	// beyond Chang–Roberts' own, 0 without loss.
	Challenges int
}

// Elect runs one fault-free Chang–Roberts election on the ring order,
// started at time 0 by the nodes at positions initiators, and returns once
// the ring is quiet.
func Elect(order []ring.UID, initiators []int, seed uint64, delay Delay) (ElectionResult, error) {
	return ElectWith(ring.Algorithm{}, order, initiators, seed, delay, ring.Config{})
}

// ElectWith is Elect running alg (the zero value: Chang–Roberts) with
// every node configured by node (Self and Ring are filled in): per-hop
// acknowledgement, for one.
func ElectWith(alg ring.Algorithm, order []ring.UID, initiators []int, seed uint64, delay Delay, node ring.Config) (ElectionResult, error) {
	r, err := ring.NewRing(order)
	if err != nil {
		return ElectionResult{}, err
	}
	s, err := New(Config{Ring: r, Seed: seed, Delay: delay, Node: node, Algorithm: alg})
	if err != nil {
		return ElectionResult{}, err
	}
	for _, i := range initiators {
		s.Start(i, 0)
	}
	s.Run(time.Duration(1<<62 - 1))
	res := ElectionResult{Counts: s.Counts()}
	o := s.Outcome()
	res.Leader, res.LeaderIsMax = o.Leader, o.IsMaxLive
	// Done is when the last member learnt the leader, or the winner its
	// announcement's return, whichever is later: a Bully leader tells the
	// others directly and has nothing come back.
	if c := s.Completions(); len(c) > 0 {
		res.Done = max(c[len(c)-1].At, s.LastLeaderChange())
	}
	for i := range s.Len() {
		res.Challenges += s.Node(i).Stats().Challenges
	}
	if len(initiators) > 0 {
		maxAt := r.Index(o.MaxLive)
		res.MaxDistance = (maxAt - initiators[0] + len(order)) % len(order)
	}
	return res, nil
}
