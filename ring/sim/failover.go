package sim

import (
	"fmt"
	"time"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/membership"
)

// FailoverConfig describes a coordinator crash in a ring of ringnode
// servers: the election core and the coordinator core of every server, as
// ring/server runs them, on a consistent-hash (sorted) ring.
type FailoverConfig struct {
	Algorithm ring.Algorithm // the zero value: Chang–Roberts
	N         int
	Replicas  int
	DelayMin  time.Duration // per-link base delays are drawn from [DelayMin, DelayMax]
	DelayMax  time.Duration
	Jitter    time.Duration // mean of the per-message exponential jitter
	Suspect   time.Duration // failure-detector timeout, both directions
	Heartbeat time.Duration
	HopBound  time.Duration
	Horizon   time.Duration // virtual time simulated after the crash
	// AckTimeout is per-hop acknowledgement (ring.Config.AckTimeout), as
	// ringnode runs it: the hop bound.
	AckTimeout time.Duration
}

// DefaultFailover mirrors ringnode's defaults (700 ms detector, 100 ms
// heartbeats, 10 ms hop bound) and loopback-like links.
var DefaultFailover = FailoverConfig{
	N: 16, Replicas: membership.DefaultReplicas,
	DelayMin: 50 * time.Microsecond, DelayMax: 150 * time.Microsecond, Jitter: 50 * time.Microsecond,
	Suspect: ring.DefaultSuspectTimeout, Heartbeat: 100 * time.Millisecond, HopBound: 10 * time.Millisecond,
	Horizon: 5 * time.Second, AckTimeout: 10 * time.Millisecond,
}

// FailoverResult is what one coordinator crash measured, in virtual time
// from the crash; a phase that never happened is -1.
type FailoverResult struct {
	Killed, NewCoordinator string
	NewIsMaxLive           bool
	Coordinators           int // live servers whose role is active at the end
	Detect                 time.Duration
	Propagation            time.Duration // first ELECTION sent → ELECTED back at the winner
	ElectedRound           time.Duration // the winner's ELECTED once around the survivors
	AllKnow                time.Duration // every live server knows the new coordinator
	Metadata               time.Duration // every live server holds the new coordinator's metadata
	Counts                 Counts        // messages after the crash
}

// Failover settles a ring of c.N servers under the max-UID coordinator,
// crashes it, and measures the failover until c.Horizon later.
func Failover(c FailoverConfig, seed uint64) (FailoverResult, error) {
	if c.N < 2 {
		return FailoverResult{}, fmt.Errorf("failover: n=%d, need at least 2 servers", c.N)
	}
	addrs := make([]string, c.N)
	for i := range addrs {
		addrs[i] = Addr(i)
	}
	meta, err := membership.New(1, 1, addrs[0], c.Replicas, addrs)
	if err != nil {
		return FailoverResult{}, err
	}
	// The settled ring's coordinator is its max UID, the last in order.
	coordAt := len(meta.Servers) - 1
	if meta, err = membership.New(1, 1, meta.Servers[coordAt], c.Replicas, addrs); err != nil {
		return FailoverResult{}, err
	}
	// A few heartbeats (and acks) before the crash, so the detectors run
	// from heartbeats heard rather than from boot.
	crashAt := 3*c.Heartbeat + c.DelayMax
	var detect, allKnow, metaAt time.Duration = -1, -1, -1
	announced := map[int]time.Duration{} // node → when its ELECTION came back
	newRound := uint64(0)
	var s *Sim
	s, err = New(Config{
		Meta: meta, Seed: seed, Algorithm: c.Algorithm,
		Delay: PerLink(seed, c.DelayMin, c.DelayMax, c.Jitter),
		Node: ring.Config{
			Leader: ring.UIDOf(meta.Coordinator), Round: 1,
			HopBound: c.HopBound, SuspectTimeout: c.Suspect, HeartbeatInterval: c.Heartbeat, AckTimeout: c.AckTimeout,
		},
		Observe: func(at time.Duration, i int, st ring.Status) {
			if _, seen := announced[i]; s.Node(i).Stats().Announced > 0 && !seen {
				announced[i] = at
			}
			// Starting an election changes a node's status: the first
			// change by a node that has initiated one is the detection.
			if detect < 0 && s.Node(i).Stats().Initiated > 0 {
				detect = at
			}
		},
		OnMeta: func(at time.Duration, _ int, m *membership.Metadata) {
			if m.Round > 1 {
				newRound, metaAt = m.Round, at
			}
		},
	})
	if err != nil {
		return FailoverResult{}, err
	}
	s.Run(crashAt)
	before := s.Counts()
	s.Crash(coordAt, crashAt)
	// Stop once every survivor holds the winner's metadata: after that
	// only heartbeats would be simulated.
	for t := crashAt + c.Suspect; ; t += c.Heartbeat {
		s.Run(min(t, crashAt+c.Horizon))
		if t >= crashAt+c.Horizon || newRound > 0 && allInstalled(s, newRound) {
			break
		}
	}

	res := FailoverResult{Killed: meta.Servers[coordAt], Detect: -1, Propagation: -1, ElectedRound: -1, AllKnow: -1, Metadata: -1}
	res.Counts = s.Counts().minus(before)
	o := s.Outcome()
	res.NewIsMaxLive = o.IsMaxLive
	if o.Agreed && o.LeaderUp {
		res.NewCoordinator = meta.Servers[s.cfg.Ring.Index(o.Leader)]
		allKnow = s.LastLeaderChange()
	}
	for i := range s.Len() {
		if s.Alive(i) && s.Role(i).Active() {
			res.Coordinators++
		}
	}
	switch c := s.Completions(); {
	case len(c) > 0 && detect >= 0:
		last := c[len(c)-1]
		res.Propagation = last.At - detect
		if a, ok := announced[last.Node]; ok {
			res.ElectedRound = last.At - a
		}
	case res.NewCoordinator != "":
		res.Propagation, res.ElectedRound = 0, 0 // a lone survivor wins as it starts
	}
	since := func(t time.Duration) time.Duration {
		if t < 0 {
			return -1
		}
		return t - crashAt
	}
	res.Detect, res.AllKnow = since(detect), since(allKnow)
	// Every live member holds the winner's metadata when the last push of
	// the newest round has landed and all agree on it.
	if newRound > 0 && allInstalled(s, newRound) {
		res.Metadata = since(metaAt)
	}
	return res, nil
}

func allInstalled(s *Sim, round uint64) bool {
	for i := range s.Len() {
		if s.Alive(i) && s.Role(i).Round() != round {
			return false
		}
	}
	return true
}

func (c Counts) minus(o Counts) Counts {
	for t := range c.Sent {
		c.Sent[t] -= o.Sent[t]
	}
	c.Lost -= o.Lost
	c.LostWithCrash -= o.LostWithCrash
	c.Unreachable -= o.Unreachable
	c.Acks -= o.Acks
	c.MetaPushes -= o.MetaPushes
	return c
}
