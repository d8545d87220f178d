package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/coordinator"
	"github.com/ringside/ringside/ring/membership"
)

// Config describes one simulated ring.
type Config struct {
	// Ring is the membership in message order.
	Ring *ring.Ring
	// Node is the template for every node's configuration; Self, Ring,
	// Rand and Now are filled in per node. Set Leader/Round to start with
	// an established coordinator.
	Node ring.Config
	// Algorithm is the election every node runs; the zero value is
	// Chang–Roberts. One that needs FIFO links gets them: a message is
	// never delivered before one sent earlier on the same link.
	Algorithm ring.Algorithm
	// Delay draws message delays (default: 1 ms constant).
	Delay Delay
	// Loss is the probability that a message is silently dropped.
	Loss float64
	// Seed drives every random choice of the run.
	Seed uint64
	// Observe, if set, is called whenever a live node's status changes.
	Observe func(at time.Duration, node int, st ring.Status)
	// Meta, when set, gives every node the coordinator role
	// (ring/coordinator) beside its election, as ringnode runs it: every
	// node starts holding Meta, members ack the coordinator's heartbeats,
	// and the winner of an election takes the role over and pushes its
	// metadata to every member, which installs it. Ring may be nil: it is
	// then Meta's ring (members in UID order), and must be that otherwise.
	Meta *membership.Metadata
	// OnMeta, if set, is called whenever a live node installs metadata.
	OnMeta func(at time.Duration, node int, m *membership.Metadata)
	// Trace, if set, sees every message a node sends (acknowledgements
	// and retransmissions too), before loss or refusal.
	Trace func(at time.Duration, from int, m ring.Message)
}

// Counts are message statistics of a run.
type Counts struct {
	Sent          [5]int // by ring.MsgType
	Lost          int    // dropped by the loss probability
	LostWithCrash int    // accepted by a node that crashed before handling it
	Unreachable   int    // sends refused because the target was down or partitioned
	Acks          int    // heartbeat acks (with Config.Meta)
	// HopAcks and Retransmissions are what per-hop acknowledgement
	// (ring.Config.AckTimeout) adds; Sent holds the algorithm's own
	// messages only, so it still compares with the closed forms.
	HopAcks, Retransmissions int
	MetaPushes               int // metadata sent by a coordinator to a member (with Config.Meta)
}

// Of returns the number of sent messages of type t.
func (c Counts) Of(t ring.MsgType) int { return c.Sent[t] }

// Total is the number of messages sent, all types.
func (c Counts) Total() int {
	s := 0
	for _, v := range c.Sent {
		s += v
	}
	return s
}

// Completion is an election that finished: its winner saw ELECTED return.
type Completion struct {
	At     time.Duration
	Node   int
	Round  uint64
	Leader ring.UID
}

// Sim is one simulated run.
type Sim struct {
	cfg    Config
	rng    *rand.Rand
	q      queue
	seq    uint64
	now    time.Duration
	nodes  []ring.Elector
	fifo   map[uint64]time.Duration   // with Algorithm.FIFO: the last delivery per link
	roles  []*coordinator.Coordinator // with Config.Meta
	addrs  []string                   // with Config.Meta: member addresses by ring index
	alive  []bool
	inc    []uint32 // incarnation, bumped on crash
	tickAt []time.Duration
	tickOn []bool
	tickG  []uint32
	group  []int // partition group per node; nil when healed
	parts  [][]int
	last   []ring.Status
	ended  []int // each node's Stats().Ended at its last observe

	counts      Counts
	completions []Completion
	lastChange  time.Duration
}

// New builds a simulation with every node alive at time 0.
func New(cfg Config) (*Sim, error) {
	if cfg.Meta != nil && cfg.Ring == nil {
		cfg.Ring = cfg.Meta.Ring()
	}
	if cfg.Ring == nil || cfg.Ring.Len() == 0 {
		return nil, errors.New("sim: empty ring")
	}
	if cfg.Loss < 0 || cfg.Loss >= 1 {
		return nil, fmt.Errorf("sim: loss %v outside [0,1)", cfg.Loss)
	}
	if cfg.Algorithm.Name == "" {
		alg, err := ring.Lookup(ring.ChangRoberts)
		if err != nil {
			return nil, err
		}
		cfg.Algorithm = alg
	}
	if cfg.Delay == nil {
		cfg.Delay = Constant(time.Millisecond)
	}
	n := cfg.Ring.Len()
	s := &Sim{
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(cfg.Seed, 0x5eed)),
		nodes:  make([]ring.Elector, n),
		alive:  make([]bool, n),
		inc:    make([]uint32, n),
		tickAt: make([]time.Duration, n),
		tickOn: make([]bool, n),
		tickG:  make([]uint32, n),
		last:   make([]ring.Status, n),
		ended:  make([]int, n),
	}
	if cfg.Algorithm.FIFO {
		s.fifo = map[uint64]time.Duration{}
	}
	if cfg.Meta != nil {
		if err := s.initRoles(); err != nil {
			return nil, err
		}
	}
	for i := range n {
		if err := s.boot(i, cfg.Node.Round, cfg.Node.Leader); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Sim) boot(i int, round uint64, leader ring.UID) error {
	nc := s.cfg.Node
	nc.Self, nc.Ring, nc.Round, nc.Leader, nc.Now = s.cfg.Ring.Order()[i], s.cfg.Ring, round, leader, s.now
	if nc.SuspectJitter > 0 {
		nc.Rand = rand.New(rand.NewPCG(s.cfg.Seed, uint64(i)+1))
	}
	node, err := s.cfg.Algorithm.NewElector(nc)
	if err != nil {
		return fmt.Errorf("sim: node %d: %w", i, err)
	}
	s.nodes[i], s.alive[i], s.last[i], s.ended[i] = node, true, node.Status(), 0
	s.tickOn[i] = false
	s.schedule(i)
	return nil
}

func (s *Sim) push(e event) {
	s.seq++
	e.seq = s.seq
	s.q.push(e)
}

// Start makes node i initiate an election at time at.
func (s *Sim) Start(i int, at time.Duration) { s.push(event{at: at, kind: evStart, node: int32(i)}) }

// Crash stops node i at time at; messages it had accepted but not handled
// are lost with it.
func (s *Sim) Crash(i int, at time.Duration) { s.push(event{at: at, kind: evCrash, node: int32(i)}) }

// Restart brings node i back at time at with its persisted round and no
// leader; every live node learns it is up again (the coordinator's metadata).
func (s *Sim) Restart(i int, at time.Duration) {
	s.push(event{at: at, kind: evRestart, node: int32(i)})
}

// Partition splits the nodes at time at: groups[i] is node i's side;
// messages between sides are refused as if the peer were down.
func (s *Sim) Partition(groups []int, at time.Duration) {
	s.parts = append(s.parts, groups)
	s.push(event{at: at, kind: evPartition, aux: uint32(len(s.parts) - 1)})
}

// Heal ends any partition at time at.
func (s *Sim) Heal(at time.Duration) { s.push(event{at: at, kind: evHeal}) }

// Run processes events in time order until none is left or the next one is
// after until; it returns the virtual time reached.
func (s *Sim) Run(until time.Duration) time.Duration {
	for s.q.len() > 0 && s.q.next() <= until {
		e := s.q.pop()
		s.now = e.at
		s.handle(&e)
	}
	return s.now
}

func (s *Sim) handle(e *event) {
	i := int(e.node)
	switch e.kind {
	case evDeliver:
		if !s.alive[i] || s.inc[i] != e.aux {
			s.counts.LostWithCrash++
			return
		}
		s.emit(i, s.nodes[i].Step(s.now, e.msg))
		if e.msg.Type == ring.MsgHeartbeat && s.roles != nil {
			s.ack(i, e.msg.From)
		}
	case evAck:
		if s.alive[i] && s.inc[i] == e.aux {
			s.roles[i].Heard(s.now, s.addrs[s.cfg.Ring.Index(e.msg.From)])
			s.schedule(i)
		}
	case evMeta:
		if s.alive[i] && s.inc[i] == e.aux {
			s.install(i, e.meta)
		}
	case evUnreachable:
		if s.alive[i] {
			s.emit(i, s.nodes[i].Unreachable(s.now, e.msg))
		}
	case evTick:
		if s.alive[i] && e.aux == s.tickG[i] {
			s.tickOn[i] = false
			s.emit(i, s.nodes[i].Tick(s.now))
			if s.roles != nil {
				up, err := s.roles[i].Tick(s.now)
				s.apply(i, up, err)
			}
		}
	case evStart:
		if s.alive[i] {
			s.emit(i, s.nodes[i].Start(s.now))
		}
	case evCrash:
		if s.alive[i] {
			s.alive[i] = false
			s.inc[i]++
			s.tickG[i]++
		}
	case evRestart:
		if !s.alive[i] {
			st := s.nodes[i].Status()
			if err := s.boot(i, st.Round, ring.UID{}); err != nil {
				panic(err) // the ring was valid at New; unreachable
			}
			self := s.cfg.Ring.Order()[i]
			for j, n := range s.nodes {
				if j != i && s.alive[j] {
					n.MarkUp(self)
				}
			}
			s.observe(i)
		}
	case evPartition:
		s.group = s.parts[e.aux]
	case evHeal:
		s.group = nil
		for j, n := range s.nodes {
			if s.alive[j] {
				for k, u := range s.cfg.Ring.Order() {
					if s.alive[k] {
						n.MarkUp(u)
					}
				}
			}
		}
	}
}

// emit sends node i's output and reschedules its timer.
func (s *Sim) emit(i int, out []ring.Message) {
	for k := range out {
		s.send(i, &out[k])
	}
	s.observe(i)
	s.schedule(i)
}

func (s *Sim) send(from int, m *ring.Message) {
	if s.cfg.Trace != nil {
		s.cfg.Trace(s.now, from, *m)
	}
	switch {
	case m.Ack:
		s.counts.HopAcks++
	case m.Resent:
		s.counts.Retransmissions++
	default:
		s.counts.Sent[m.Type]++
	}
	to := s.cfg.Ring.Index(m.To)
	d := s.cfg.Delay(s.rng, from, to)
	if s.refused(from, to) {
		// A refused connection: the sender learns after a round trip.
		s.counts.Unreachable++
		s.push(event{at: s.now + 2*d, kind: evUnreachable, node: int32(from), msg: *m})
		return
	}
	if s.lose() {
		return
	}
	at := s.now + d
	if s.fifo != nil {
		link := uint64(from)<<32 | uint64(to)
		at = max(at, s.fifo[link])
		s.fifo[link] = at
	}
	s.push(event{at: at, kind: evDeliver, node: int32(to), aux: s.inc[to], msg: *m})
}

// refused reports whether a message from → to cannot be delivered: the
// target is down or on the other side of a partition.
func (s *Sim) refused(from, to int) bool {
	return !s.alive[to] || s.group != nil && s.group[from] != s.group[to]
}

// lose draws whether a message is lost, and counts it.
func (s *Sim) lose() bool {
	if s.cfg.Loss > 0 && s.rng.Float64() < s.cfg.Loss {
		s.counts.Lost++
		return true
	}
	return false
}

func (s *Sim) schedule(i int) {
	at, ok := s.nodes[i].Deadline()
	if s.roles != nil {
		if rat, rok := s.roles[i].Deadline(); rok && (!ok || rat < at) {
			at, ok = rat, true
		}
	}
	if !ok || s.tickOn[i] && s.tickAt[i] == at {
		return
	}
	if at < s.now {
		at = s.now
	}
	s.tickG[i]++
	s.tickAt[i], s.tickOn[i] = at, true
	s.push(event{at: at, kind: evTick, node: int32(i), aux: s.tickG[i]})
}

func (s *Sim) observe(i int) {
	st, ended := s.nodes[i].Status(), s.nodes[i].Stats().Ended
	prev := s.last[i]
	// An announcement ended with its leader standing: the election is
	// complete (the announcer is the winner, but for Dolev–Klawe–Rodeh).
	// Counted, not read off Status: an announcement with no other live
	// member to go to starts and ends within one step.
	completed := ended > s.ended[i] && !st.Leader.IsZero()
	s.ended[i] = ended
	if st == prev && !completed {
		return
	}
	s.last[i] = st
	if st.Leader != prev.Leader {
		s.lastChange = s.now
	}
	if completed {
		s.completions = append(s.completions, Completion{At: s.now, Node: i, Round: st.Round, Leader: st.Leader})
	}
	if s.cfg.Observe != nil {
		s.cfg.Observe(s.now, i, st)
	}
	if s.roles != nil {
		s.followElection(i, st)
	}
}

// Now is the current virtual time.
func (s *Sim) Now() time.Duration { return s.now }

// Counts returns the message counts so far.
func (s *Sim) Counts() Counts { return s.counts }

// Completions lists the elections that finished, in time order.
func (s *Sim) Completions() []Completion { return s.completions }

// LastLeaderChange is the last instant any node's known leader changed.
func (s *Sim) LastLeaderChange() time.Duration { return s.lastChange }

// Node returns node i's state machine.
func (s *Sim) Node(i int) ring.Elector { return s.nodes[i] }

// Alive reports whether node i is up.
func (s *Sim) Alive(i int) bool { return s.alive[i] }

// Len is the number of nodes.
func (s *Sim) Len() int { return len(s.nodes) }

// Outcome summarises the leaders the live nodes believe in.
type Outcome struct {
	Live      int
	Agreed    bool     // every live node knows the same leader
	Leader    ring.UID // that leader, when Agreed
	LeaderUp  bool     // the agreed leader is alive and leads
	MaxLive   ring.UID
	IsMaxLive bool
}

// Outcome inspects the live nodes now.
func (s *Sim) Outcome() Outcome {
	var o Outcome
	o.Agreed = true
	for i, n := range s.nodes {
		if !s.alive[i] {
			continue
		}
		o.Live++
		self := s.cfg.Ring.Order()[i]
		if o.Live == 1 || o.MaxLive.Less(self) {
			o.MaxLive = self
		}
		l, ok := n.Leader()
		if !ok || o.Live > 1 && l != o.Leader {
			o.Agreed = false
		}
		if o.Live == 1 {
			o.Leader = l
		}
	}
	if !o.Agreed {
		o.Leader = ring.UID{}
		return o
	}
	if j := s.cfg.Ring.Index(o.Leader); j >= 0 && s.alive[j] {
		l, _ := s.nodes[j].Leader()
		o.LeaderUp = l == o.Leader
	}
	o.IsMaxLive = o.LeaderUp && o.Leader == o.MaxLive
	return o
}
