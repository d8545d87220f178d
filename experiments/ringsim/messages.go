package ringsim

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/sim"
)

// Initiator modes.
const (
	InitOne = "one"
	InitAll = "all"
)

// Messages is the ring-messages experiment: election messages of every
// registered algorithm against n, ring order and initiators, beside their
// worst-case bounds and, where one exists, their exact forms.
type Messages struct {
	ns          experiments.IntList
	orders      experiments.ChoiceList
	initiators  experiments.ChoiceList
	algorithms  experiments.ChoiceList
	delayMin    time.Duration
	delayMax    time.Duration
	ackTimeout  time.Duration
	maxMessages int
}

func (*Messages) Spec() experiments.Spec {
	return experiments.Spec{Name: "ring-messages", Backends: []string{"sim"}, Quick: 200, Paper: 1000, Row: messagesRow{},
		Summary: "election messages of every ring-election algorithm vs ring size, ring order and initiators, beside their bounds and exact forms (simulated)"}
}

func (m *Messages) Flags(fs *flag.FlagSet) {
	m.ns = experiments.IntList{4, 8, 16, 32, 64, 128}
	m.orders = experiments.ChoiceList{Vals: []string{sim.OrderSorted, sim.OrderRandom}, Allowed: sim.Orders}
	m.initiators = experiments.ChoiceList{Vals: []string{InitOne, InitAll}, Allowed: []string{InitOne, InitAll}}
	m.algorithms = experiments.ChoiceList{Vals: ring.AlgorithmNames(), Allowed: ring.AlgorithmNames()}
	fs.Var(&m.ns, "n", "ring sizes, comma-separated")
	fs.Var(&m.orders, "order", "ring orders: sorted (consistent hash), random, reverse")
	fs.Var(&m.initiators, "initiators", "who starts the election: one (a random server), all")
	fs.Var(&m.algorithms, "algorithm", "election algorithms, comma-separated or all: "+strings.Join(ring.AlgorithmNames(), ", "))
	fs.DurationVar(&m.delayMin, "delay-min", time.Millisecond, "minimum one-way delay")
	fs.DurationVar(&m.delayMax, "delay-max", 3*time.Millisecond, "maximum one-way delay (uniform)")
	fs.DurationVar(&m.ackTimeout, "ack-timeout", 10*time.Millisecond,
		"per-hop acknowledgement as ringnode runs it, counted apart (0: off); longer than a round trip, so without loss nothing is resent")
	fs.IntVar(&m.maxMessages, "max-messages", 1_000, maxMessagesUsage)
}

// messagesRow is one election.
type messagesRow struct {
	Algorithm       string        `csv:"algorithm"`
	N               int           `csv:"n"`
	Order           string        `csv:"order"`
	Initiators      string        `csv:"initiators"`
	Rep             int           `csv:"rep"`
	Seed            uint64        `csv:"seed"`
	Initiator       int           `csv:"initiator"`
	MaxDistance     int           `csv:"max_distance"`
	ElectionMsgs    int           `csv:"election_msgs"`
	ElectedMsgs     int           `csv:"elected_msgs"`
	EndMsgs         int           `csv:"end_msgs"`
	TotalMsgs       int           `csv:"total_msgs"`
	LeaderIsMax     bool          `csv:"leader_is_max"`
	Election        time.Duration `csv:"election_virtual_ms"`
	Challenges      int           `csv:"challenges"`
	HopAcks         int           `csv:"hop_acks"`
	Retransmissions int           `csv:"retransmissions"`
}

func (m *Messages) Run(ctx context.Context, env *experiments.Env) error {
	if m.delayMin <= 0 || m.delayMax < m.delayMin {
		return fmt.Errorf("delays: want 0 < delay-min ≤ delay-max, got %s and %s", m.delayMin, m.delayMax)
	}
	if m.ackTimeout < 0 {
		return fmt.Errorf("ack-timeout %s: must not be negative", m.ackTimeout)
	}
	if m.maxMessages < 1 {
		return fmt.Errorf("max-messages %d: must be positive", m.maxMessages)
	}
	algs, err := lookupAll(m.algorithms.Vals)
	if err != nil {
		return err
	}
	type cell struct {
		n           int
		order, init string
		alg         ring.Algorithm
	}
	var cells []cell
	for _, n := range m.ns {
		for _, o := range m.orders.Vals {
			for _, in := range m.initiators.Vals {
				for _, a := range algs {
					cells = append(cells, cell{n, o, in, a})
				}
			}
		}
	}
	delay := sim.Uniform(m.delayMin, m.delayMax)
	elect := func(c cell, rep int, seed uint64) (messagesRow, error) {
		rng := rand.New(rand.NewPCG(seed, 1))
		order, err := sim.Arrange(sim.UIDs(c.n), c.order, rng)
		if err != nil {
			return messagesRow{}, err
		}
		starters := make([]int, c.n)
		for i := range starters {
			starters[i] = i
		}
		if c.init == InitOne {
			starters = starters[rng.IntN(c.n):][:1]
		}
		res, err := sim.ElectWith(c.alg, order, starters, seed, delay, ring.Config{AckTimeout: m.ackTimeout})
		if err != nil {
			return messagesRow{}, err
		}
		initiator := -1
		if c.init == InitOne {
			initiator = starters[0]
		}
		cnt := res.Counts
		return messagesRow{Algorithm: c.alg.Name, N: c.n, Order: c.order, Initiators: c.init, Rep: rep, Seed: seed, Initiator: initiator,
			MaxDistance: res.MaxDistance, ElectionMsgs: cnt.Of(ring.MsgElection), ElectedMsgs: cnt.Of(ring.MsgElected),
			EndMsgs: cnt.Of(ring.MsgEnd), TotalMsgs: cnt.Total(), LeaderIsMax: res.LeaderIsMax, Election: res.Done,
			Challenges: res.Challenges, HopAcks: cnt.HopAcks, Retransmissions: cnt.Retransmissions}, nil
	}
	// The algorithms of one ring share its seeds (common random numbers:
	// the same orders and initiators), and a ring's seeds do not depend on
	// which algorithms run, so Chang–Roberts' rows are the same alone.
	grid := experiments.Grid{Cells: len(cells), SameSeed: len(algs), Parallel: experiments.AllCPUs,
		Weight: func(i int) float64 { return float64(cells[i].n) }} // the largest rings first
	return experiments.RunCells(ctx, env, grid, func(ctx context.Context, i int, seed func(int) uint64) ([]messagesRow, error) {
		c := cells[i]
		var rows []messagesRow
		_, _, exact := exactForm(c.alg.Name, c.n, c.order, c.init)
		budget := newCellBudget(env.Reps, m.maxMessages, exact)
		for rep := 0; rep < env.Reps; rep++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			row, err := elect(c, rep, seed(rep))
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
			if budget.spend(row.ElectionMsgs) {
				break
			}
		}
		return rows, nil
	})
}
