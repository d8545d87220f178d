package ring

import (
	"fmt"
	"time"
)

// Machine drives a Core: it is the Elector of every registered algorithm
// but Chang–Roberts, whose Node predates it and keeps its own published
// shape. Its rules are Node's: elections are numbered by rounds, a newer
// round resets a member, a member that has taken part for the algorithm's
// Horizon of hops without a leader restarts in a new round, the winner's
// announcement travels the ring (or goes to every member, for a complete
// topology), the leader sends heartbeats, a silent leader is suspected,
// and a member that sees a smaller leader than itself challenges it.
type Machine struct {
	member
	alg  Algorithm
	core Core // nil while the member takes no part in the round
	env  Env

	announceDue time.Duration // complete topology: the announcement ends at this Tick
	local       []Message     // the Core's messages to itself, received after the call
}

// NewMachine returns a member running alg's Core, at rest.
func NewMachine(cfg Config, alg Algorithm) (*Machine, error) {
	if alg.Core == nil {
		return nil, fmt.Errorf("ring %s: no Core", alg.Name)
	}
	if alg.Horizon == nil {
		alg.Horizon = func(n int) int { return 4 * n }
	}
	m := &Machine{alg: alg}
	m.env.m = m
	if err := m.init(cfg, "ring "+alg.Name); err != nil {
		return nil, err
	}
	return m, nil
}

// SetRing installs new ring metadata and forgets which members were down.
func (m *Machine) SetRing(r *Ring) error {
	if err := m.setRing(r); err != nil {
		return fmt.Errorf("ring %s: %w", m.alg.Name, err)
	}
	return nil
}

func (m *Machine) begin(now time.Duration) { m.out, m.now = m.out[:0], now }

func (m *Machine) emit(msg Message) {
	m.out = append(m.out, msg)
	m.acks.track(m.now, msg)
}

func (m *Machine) sendElection(msg Message) {
	msg.Type, msg.From, msg.Round, msg.Ack, msg.Resent = MsgElection, m.self, m.st.Round, false, false
	switch msg.Dir {
	case DirNext:
		msg.To = m.successor()
	case DirPrev:
		msg.To = m.predecessor()
	case DirDirect:
		if m.ring.Index(msg.To) < 0 {
			return
		}
	default:
		return
	}
	if msg.To == m.self {
		m.local = append(m.local, msg)
		return
	}
	m.emit(msg)
}

// drain hands the Core the messages it sent itself, until there are none
// or the round is decided.
func (m *Machine) drain() {
	for i := 0; i < len(m.local) && m.core != nil; i++ {
		m.core.Receive(&m.env, m.local[i])
	}
	m.local = m.local[:0]
}

func (m *Machine) armElection(now time.Duration) {
	if m.cfg.HopBound > 0 {
		m.electionTimer = now + time.Duration(m.alg.Horizon(m.liveMembers()))*m.cfg.HopBound
	}
}

// Start initiates an election unless one is under way here.
func (m *Machine) Start(now time.Duration) []Message {
	m.begin(now)
	if !m.st.Participant && !m.st.Announcing {
		m.start(now)
	}
	return m.out
}

func (m *Machine) start(now time.Duration) {
	m.stats.Initiated++
	m.newRound(m.st.Round + 1)
	m.join(now)
}

// newRound moves the member into round, at rest.
func (m *Machine) newRound(round uint64) {
	m.st = Status{Round: round}
	m.core, m.local = nil, m.local[:0]
	m.electionTimer = 0
	m.acks.reset()
}

// join makes the member take part in the current round.
func (m *Machine) join(now time.Duration) {
	m.st.Participant = true
	m.armElection(now)
	m.core = m.alg.Core()
	m.core.Start(&m.env)
	m.drain()
}

// announce ends the election at this member: leader won.
func (m *Machine) announce(leader UID) {
	if m.st.Announcing || leader.IsZero() {
		return
	}
	m.st.Leader, m.st.Participant, m.st.Announcing = leader, false, true
	m.stats.Announced++
	m.core, m.local = nil, m.local[:0]
	m.armElection(m.now)
	if m.det != nil {
		// A leader other than this member (Dolev–Klawe–Rodeh) is watched
		// from now: the old one's silence must not start another round.
		m.det.Heard(m.now)
	}
	if m.alg.Topology == Complete {
		for i, u := range m.ring.order {
			if i != m.pos && !m.down[i] {
				m.emit(Message{Type: MsgElected, From: m.self, To: u, Cand: leader, Round: m.st.Round, Hops: 1, Dir: DirDirect})
			}
		}
		m.announceDue = m.now // told everyone: the next Tick, at once, ends it
		return
	}
	m.passElected(leader, 1)
}

// passElected sends the announcement of leader on to the next live member,
// or ends it when there is none.
func (m *Machine) passElected(leader UID, hops uint32) {
	if succ := m.successor(); succ != m.self {
		m.emit(Message{Type: MsgElected, From: m.self, To: succ, Cand: leader, Round: m.st.Round, Hops: hops})
		return
	}
	if m.st.Announcing && m.st.Leader == leader {
		m.finish(m.now)
	}
}

// finish ends this member's announcement.
func (m *Machine) finish(now time.Duration) {
	m.stats.Ended++
	m.st.Announcing = false
	m.electionTimer = 0
	if m.st.Leader == m.self {
		m.nextBeat = now
	}
}

// Step handles one received message.
func (m *Machine) Step(now time.Duration, msg Message) []Message {
	m.begin(now)
	if !msg.Type.Valid() || msg.Ack && !acked(msg.Type) || msg.Type == MsgEnd {
		return m.out
	}
	if msg.Ack {
		m.MarkUp(msg.From)
		m.acks.drop(msg.From, msg)
		return m.out
	}
	if m.acks.covers(msg) {
		m.out = append(m.out, ack(m.self, msg))
		if m.acks.duplicate(msg) {
			return m.out
		}
	}
	if msg.Round < m.st.Round {
		return m.out
	}
	if msg.Type == MsgHeartbeat {
		m.heartbeat(now, msg)
		return m.out
	}
	m.MarkUp(msg.From)
	if msg.Round > m.st.Round {
		m.forgetDown()
		m.suspectQuietLeader(now)
		m.newRound(msg.Round)
	}
	switch msg.Type {
	case MsgElection:
		m.election(now, msg)
	case MsgElected:
		m.elected(now, msg)
	}
	return m.out
}

func (m *Machine) election(now time.Duration, msg Message) {
	if !m.st.Leader.IsZero() {
		return // the round is decided here: a straggler
	}
	if m.core == nil {
		m.join(now) // woken by the round's first message
	}
	if m.core != nil {
		m.core.Receive(&m.env, msg)
		m.drain()
	}
}

func (m *Machine) elected(now time.Duration, msg Message) {
	if m.st.Announcing && msg.Cand == m.st.Leader {
		if msg.Dir != DirDirect {
			m.finish(now) // the announcement came back
		}
		return
	}
	if msg.Cand.Less(m.self) {
		m.challenge(now)
		return
	}
	m.st = Status{Round: m.st.Round, Leader: msg.Cand}
	m.core, m.local = nil, m.local[:0]
	m.electionTimer = 0
	if m.det != nil {
		m.det.Heard(now)
	}
	if msg.Cand == m.self {
		m.nextBeat = now // named by another member (Dolev–Klawe–Rodeh)
	}
	if msg.Dir != DirDirect && msg.Hops < uint32(m.ring.Len()) {
		m.passElected(msg.Cand, msg.Hops+1)
	}
}

// challenge answers a leader smaller than this member: see Node.challenge.
func (m *Machine) challenge(now time.Duration) {
	m.stats.Challenges++
	m.start(now)
}

func (m *Machine) heartbeat(now time.Duration, msg Message) {
	m.MarkUp(msg.From)
	busy := m.st.Participant || m.st.Announcing
	if msg.Round > m.st.Round && msg.Cand.Less(m.self) {
		// As Node.heartbeat: busy in an older round or not.
		m.newRound(msg.Round)
		m.challenge(now)
		return
	}
	if msg.Round > m.st.Round || !busy && (m.st.Leader.IsZero() || m.st.Leader == msg.Cand) {
		m.newRound(msg.Round)
		m.st.Leader = msg.Cand
	}
	if m.det != nil && m.st.Leader == msg.Cand {
		m.det.Heard(now)
	}
}

// Unreachable reports that msg could not be delivered: its target is
// marked down and the message goes on to the next live member its way.
func (m *Machine) Unreachable(now time.Duration, msg Message) []Message {
	m.begin(now)
	m.acks.drop(msg.To, msg)
	m.unreachable(msg)
	return m.out
}

func (m *Machine) unreachable(msg Message) {
	m.MarkDown(msg.To)
	if msg.Round != m.st.Round {
		return
	}
	switch {
	case msg.Type == MsgElection && m.core != nil:
		if r, ok := m.core.(Rerouter); ok {
			r.Undeliverable(&m.env, msg)
		} else if msg.Dir != DirDirect {
			m.sendElection(msg)
		}
		m.drain()
	case msg.Type == MsgElected && msg.Dir != DirDirect:
		m.passElected(msg.Cand, msg.Hops)
	}
}

// Tick fires the timers due at now.
func (m *Machine) Tick(now time.Duration) []Message {
	m.begin(now)
	var resent int
	var gaveUp []Message
	m.out, resent, gaveUp = m.acks.retransmit(now, m.out)
	m.stats.Retransmissions += resent
	for _, msg := range gaveUp {
		m.unreachable(msg)
	}
	switch {
	case m.electionTimer > 0 && now >= m.electionTimer:
		m.stats.Restarts++
		m.forgetDown()
		m.start(now)
	case m.det != nil && m.st.Leader != m.self && !m.st.Participant && !m.st.Announcing && m.det.Suspect(now):
		m.forgetDown()
		m.MarkDown(m.st.Leader)
		m.start(now)
	}
	if m.st.Announcing && m.alg.Topology == Complete && now >= m.announceDue {
		m.finish(now)
	}
	m.beat(now)
	return m.out
}

// Deadline is the earliest instant Tick has work.
func (m *Machine) Deadline() (time.Duration, bool) {
	at, ok := m.deadline()
	if m.st.Announcing && m.alg.Topology == Complete && (!ok || m.announceDue < at) {
		at, ok = m.announceDue, true
	}
	return at, ok
}
