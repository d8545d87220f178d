package ring

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"time"
)

// Elector is one member's election state machine: the contract the
// simulator (ring/sim) and ringnode's transport drive, whatever the
// algorithm. Methods return the messages to send; the slice is reused by
// the next call, so send or copy it first. Chang–Roberts (Node) implements
// it directly; every other algorithm is a Core driven by a Machine.
type Elector interface {
	Self() UID
	// Start initiates an election; it does nothing while one is under way
	// here.
	Start(now time.Duration) []Message
	// Step handles one received message.
	Step(now time.Duration, m Message) []Message
	// Unreachable reports that m could not be delivered to m.To.
	Unreachable(now time.Duration, m Message) []Message
	// Tick fires the timers due at now; Deadline says when the next is.
	Tick(now time.Duration) []Message
	Deadline() (at time.Duration, ok bool)
	Status() Status
	Leader() (UID, bool)
	Stats() Stats
	Ring() *Ring
	// SetRing installs new membership; MarkUp and MarkDown record what
	// the shell learnt of a member's liveness.
	SetRing(r *Ring) error
	MarkUp(u UID)
	MarkDown(u UID)
}

// Topology is which members an algorithm may send election messages to.
type Topology uint8

const (
	// Unidirectional: only the next live member clockwise.
	Unidirectional Topology = iota
	// Bidirectional: the next and the previous live members.
	Bidirectional
	// Complete: any member of the ring's metadata.
	Complete
)

func (t Topology) String() string {
	switch t {
	case Unidirectional:
		return "unidirectional ring"
	case Bidirectional:
		return "bidirectional ring"
	case Complete:
		return "complete graph"
	}
	return fmt.Sprintf("topology(%d)", uint8(t))
}

// Algorithm is a registered election algorithm: how to build a member and
// what it promises. The conformance suite (ring/sim) holds every
// registered algorithm to its promises.
type Algorithm struct {
	// Name is the registry key: --algorithm, --election, RINGNODE_ELECTION.
	Name string
	// Source cites the publication.
	Source   string
	Topology Topology
	// Bound is the worst case of election messages (the announcement
	// apart) for a ring of n members, all initiating, no faults; BoundText
	// writes it as a formula for reports.
	Bound     func(n int) int
	BoundText string
	// Horizon bounds, in hops, the longest chain of messages one election
	// and its announcement need on n live members, from the first
	// initiator to the announcement's end: a Machine member that has taken
	// part for Horizon·Config.HopBound without a leader restarts the
	// election in a new round (Chang–Roberts' Node keeps its published
	// 2n from its own joining). Zero means 4n.
	Horizon func(n int) int
	// FIFO says the algorithm needs first-in first-out links, as TCP
	// gives; the simulator then keeps each link's order.
	FIFO bool
	// Core makes a member's per-round state (a Machine drives it); New
	// builds a whole Elector instead (Chang–Roberts). Exactly one is set.
	Core func() Core
	New  func(Config) (Elector, error)
}

// NewElector builds a member running a.
func (a Algorithm) NewElector(cfg Config) (Elector, error) {
	if a.New != nil {
		return a.New(cfg)
	}
	return NewMachine(cfg, a)
}

// ChangRoberts is the registry name of the default algorithm.
const ChangRoberts = "chang-roberts"

var registry = map[string]Algorithm{}

// Register adds a to the registry; a duplicate or incomplete entry is a
// programming error and panics at init.
func Register(a Algorithm) {
	switch {
	case a.Name == "" || strings.ContainsAny(a.Name, " ,=\t\n"):
		panic(fmt.Sprintf("ring: algorithm name %q: want a non-empty word", a.Name))
	case (a.Core == nil) == (a.New == nil):
		panic(fmt.Sprintf("ring: algorithm %s: set exactly one of Core and New", a.Name))
	case a.Bound == nil || a.BoundText == "" || a.Source == "":
		panic(fmt.Sprintf("ring: algorithm %s: Source, Bound and BoundText are required", a.Name))
	}
	if _, dup := registry[a.Name]; dup {
		panic(fmt.Sprintf("ring: algorithm %s registered twice", a.Name))
	}
	registry[a.Name] = a
}

// Lookup returns the algorithm registered as name.
func Lookup(name string) (Algorithm, error) {
	a, ok := registry[name]
	if !ok {
		return Algorithm{}, fmt.Errorf("election algorithm %q: want one of %s", name, strings.Join(AlgorithmNames(), ", "))
	}
	return a, nil
}

// AlgorithmNames lists the registered algorithms, Chang–Roberts first, then
// by name.
func AlgorithmNames() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		if n != ChangRoberts {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return append([]string{ChangRoberts}, names...)
}

// Algorithms lists the registered algorithms in AlgorithmNames' order.
func Algorithms() []Algorithm {
	var out []Algorithm
	for _, n := range AlgorithmNames() {
		out = append(out, registry[n])
	}
	return out
}

// Log2Floor is ⌊log₂ n⌋ for n ≥ 1 (0 otherwise); Log2Ceil is ⌈log₂ n⌉.
func Log2Floor(n int) int {
	if n < 1 {
		return 0
	}
	return bits.Len(uint(n)) - 1
}

func Log2Ceil(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

// The algorithms of the registry; each lives in its own file.
func init() {
	Register(Algorithm{
		Name: ChangRoberts, Topology: Unidirectional,
		Source:    "E. Chang, R. Roberts: An improved algorithm for decentralized extrema-finding in circular configurations of processes. CACM 22(5), 1979",
		Bound:     func(n int) int { return n * (n + 1) / 2 },
		BoundText: "n(n+1)/2",
		Horizon:   func(n int) int { return 3 * n }, // d to the max, n round, n announced
		New:       func(c Config) (Elector, error) { return NewNode(c) },
	})
	Register(Algorithm{
		Name: "lelann", Topology: Unidirectional,
		Source:    "G. LeLann: Distributed systems — towards a formal approach. IFIP Congress 1977",
		Bound:     func(n int) int { return n * n },
		BoundText: "n²",
		Horizon:   func(n int) int { return 3 * n },
		FIFO:      true,
		Core:      NewLeLann,
	})
	Register(Algorithm{
		Name: "hirschberg-sinclair", Topology: Bidirectional,
		Source:    "D. S. Hirschberg, J. B. Sinclair: Decentralized extrema-finding in circular configurations of processors. CACM 23(11), 1980",
		Bound:     func(n int) int { return 8*n*Log2Ceil(n) + 8*n },
		BoundText: "8n⌈log₂ n⌉ + 8n",
		Horizon:   func(n int) int { return 9*n + 8 },
		Core:      NewHirschbergSinclair,
	})
	Register(Algorithm{
		Name: "franklin", Topology: Bidirectional,
		Source:    "W. R. Franklin: On an improved algorithm for decentralized extrema finding in circular configurations of processors. CACM 25(5), 1982",
		Bound:     func(n int) int { return 2*n*Log2Floor(n) + 3*n },
		BoundText: "2n⌊log₂ n⌋ + 3n",
		Horizon:   func(n int) int { return n*(Log2Floor(n)+2) + n },
		Core:      NewFranklin,
	})
	Register(Algorithm{
		Name: "dkr", Topology: Unidirectional,
		Source:    "D. Dolev, M. Klawe, M. Rodeh: An O(n log n) unidirectional distributed algorithm for extrema finding in a circle. J. Algorithms 3(3), 1982; G. L. Peterson, TOPLAS 4(4), 1982",
		Bound:     func(n int) int { return 2*n*Log2Floor(n) + n },
		BoundText: "2n⌊log₂ n⌋ + n",
		Horizon:   func(n int) int { return 2*n*(Log2Floor(n)+1) + n },
		Core:      NewDKR,
	})
	Register(Algorithm{
		Name: "bully", Topology: Complete,
		Source:    "H. Garcia-Molina: Elections in a distributed computing system. IEEE Trans. Computers C-31(1), 1982",
		Bound:     func(n int) int { return n * (n - 1) },
		BoundText: "n(n−1)",
		Horizon:   func(n int) int { return 4*n + 4 },
		Core:      NewBully,
	})
}
