package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ringside/ringside/ring"
)

// ChaosConfig describes a coordinator failover under random faults: the
// coordinator (the max UID) crashes, servers detect it by missing
// heartbeats, and up to MaxCrashes more servers crash while they elect.
type ChaosConfig struct {
	Algorithm  ring.Algorithm // the zero value: Chang–Roberts
	N          int
	Order      string
	MaxCrashes int           // extra crashes, drawn uniformly from [0, MaxCrashes]
	Window     time.Duration // the extra crashes fall in [crash, crash+Window]
	Loss       float64
	DelayMin   time.Duration // per-link base delays are drawn from [DelayMin, DelayMax]
	DelayMax   time.Duration
	Jitter     time.Duration // mean of the per-message exponential jitter
	Suspect    time.Duration // failure-detector timeout
	SuspectJit time.Duration
	Heartbeat  time.Duration
	Horizon    time.Duration // virtual time simulated after the coordinator crash
	AckTimeout time.Duration // per-hop acknowledgement (ring.Config.AckTimeout); 0: Chang–Roberts as published
}

// DefaultChaos is the ring-chaos experiment's default fault mix.
var DefaultChaos = ChaosConfig{
	N: 16, Order: OrderSorted, MaxCrashes: 3, Window: 2 * time.Second, Loss: 0.02,
	DelayMin: 200 * time.Microsecond, DelayMax: 2 * time.Millisecond, Jitter: 500 * time.Microsecond,
	Suspect: ring.DefaultSuspectTimeout, SuspectJit: 100 * time.Millisecond,
	Heartbeat: 100 * time.Millisecond, Horizon: 20 * time.Second,
	AckTimeout: 9 * time.Millisecond, // the hop bound: 2·(delay-max + 5·jitter)
}

// ChaosResult is one failover's outcome.
type ChaosResult struct {
	Crashes       int  // servers crashed besides the coordinator
	CrashedNewMax bool // the max live UID crashed during the window, forcing a second failover
	Counts        Counts
	Initiations   int // elections started, restarts included
	Restarts      int // elections restarted by the election timeout
	Challenges    int // elections started against a smaller leader (ring.Stats)
	Rounds        uint64
	Outcome       Outcome
	// Stable is the time from the coordinator crash to the last leader
	// change; meaningful when Outcome.IsMaxLive.
	Stable time.Duration
}

// Chaos runs one failover with all randomness drawn from seed.
func Chaos(c ChaosConfig, seed uint64) (ChaosResult, error) {
	if c.N < 2 {
		return ChaosResult{}, fmt.Errorf("chaos: n=%d, need at least 2 servers", c.N)
	}
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))
	order, err := Arrange(UIDs(c.N), c.Order, rng)
	if err != nil {
		return ChaosResult{}, err
	}
	r, err := ring.NewRing(order)
	if err != nil {
		return ChaosResult{}, err
	}
	coord, _ := ring.MaxUID(order)
	const crashAt = time.Second // after the heartbeats have settled
	s, err := New(Config{
		Ring: r, Seed: seed, Loss: c.Loss, Algorithm: c.Algorithm,
		Delay: PerLink(seed, c.DelayMin, c.DelayMax, c.Jitter),
		Node: ring.Config{
			Leader: coord, Round: 1,
			// A hop rarely takes longer than the slowest link plus a
			// generous jitter tail; restarts beyond that are cheap.
			HopBound:       2 * (c.DelayMax + 5*c.Jitter),
			SuspectTimeout: c.Suspect, SuspectJitter: c.SuspectJit,
			HeartbeatInterval: c.Heartbeat, AckTimeout: c.AckTimeout,
		},
	})
	if err != nil {
		return ChaosResult{}, err
	}
	res := ChaosResult{}
	coordAt := r.Index(coord)
	s.Crash(coordAt, crashAt)
	if c.MaxCrashes > 0 {
		res.Crashes = rng.IntN(min(c.MaxCrashes, c.N-2) + 1)
	}
	victims := rng.Perm(c.N)
	crashed := 0
	for _, v := range victims {
		if crashed == res.Crashes {
			break
		}
		if v == coordAt {
			continue
		}
		crashed++
		at := crashAt
		if c.Window > 0 {
			at += time.Duration(rng.Int64N(int64(c.Window)))
		}
		s.Crash(v, at)
	}
	s.Run(crashAt + c.Horizon)

	res.Counts = s.Counts()
	res.Outcome = s.Outcome()
	for i := range s.Len() {
		st := s.Node(i).Stats()
		res.Initiations += st.Initiated
		res.Restarts += st.Restarts
		res.Challenges += st.Challenges
		res.Rounds = max(res.Rounds, s.Node(i).Status().Round-1)
	}
	second, _ := ring.MaxUID(removeIndex(order, coordAt))
	res.CrashedNewMax = !s.Alive(r.Index(second))
	res.Stable = s.LastLeaderChange() - crashAt
	return res, nil
}

func removeIndex(u []ring.UID, i int) []ring.UID {
	out := make([]ring.UID, 0, len(u)-1)
	out = append(out, u[:i]...)
	return append(out, u[i+1:]...)
}
