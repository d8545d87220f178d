package ring

import (
	"fmt"
	"time"
)

// Node is one ring member's Chang–Roberts state machine (participant-flag
// variant, DESIGN §3.1). Methods return the messages to send; the returned
// slice is reused by the next call, so send or copy it first.
type Node struct{ member }

// NewNode validates cfg and returns a node at rest: not participating,
// following cfg.Leader if set.
func NewNode(cfg Config) (*Node, error) {
	n := &Node{}
	if err := n.init(cfg, "ring node"); err != nil {
		return nil, err
	}
	return n, nil
}

// SetRing installs new ring metadata (from the coordinator) and forgets
// which members were marked down.
func (n *Node) SetRing(r *Ring) error {
	if err := n.setRing(r); err != nil {
		return fmt.Errorf("ring node: %w", err)
	}
	return nil
}

func (n *Node) send(typ MsgType, to, cand UID, hops uint32) {
	m := Message{Type: typ, From: n.cfg.Self, To: to, Cand: cand, Round: n.st.Round, Hops: hops}
	n.out = append(n.out, m)
	n.acks.track(n.now, m)
}

func (n *Node) armElection(now time.Duration) {
	if n.cfg.HopBound > 0 {
		n.electionTimer = now + 2*time.Duration(n.liveMembers())*n.cfg.HopBound
	}
}

// Start makes the node initiate an election (it suspects the coordinator).
// It does nothing while the node already takes part in one.
func (n *Node) Start(now time.Duration) []Message {
	n.out, n.now = n.out[:0], now
	if n.st.Participant || n.st.Announcing {
		return n.out
	}
	n.start(now)
	return n.out
}

func (n *Node) start(now time.Duration) {
	n.stats.Initiated++
	n.st = Status{Round: n.st.Round + 1, Participant: true}
	n.acks.reset() // the old round's messages no longer matter
	n.armElection(now)
	n.forwardElection(now, n.cfg.Self, 1)
}

// forwardElection sends ELECTION(cand) to the successor, or wins at once
// when the node is alone.
func (n *Node) forwardElection(now time.Duration, cand UID, hops uint32) {
	succ := n.successor()
	if succ == n.cfg.Self {
		n.win(now)
		return
	}
	n.send(MsgElection, succ, cand, hops)
}

// win makes the node leader of the current round and announces it.
func (n *Node) win(now time.Duration) {
	n.st.Leader, n.st.Participant, n.st.Blocked = n.cfg.Self, false, false
	n.stats.Announced++
	succ := n.successor()
	if succ == n.cfg.Self {
		n.finish(now)
		return
	}
	n.st.Announcing = true
	n.armElection(now)
	n.send(MsgElected, succ, n.cfg.Self, 1)
}

// finish ends the election at the winner: ELECTED came back (or it is alone).
func (n *Node) finish(now time.Duration) {
	n.stats.Ended++
	n.st.Announcing = false
	n.electionTimer = 0
	n.nextBeat = now
	for i, u := range n.ring.order {
		if i != n.pos && !n.down[i] {
			n.send(MsgEnd, u, n.cfg.Self, 0)
		}
	}
}

// adopt moves the node into a newer round: it forgets its participation in
// the old one.
func (n *Node) adopt(round uint64) {
	if round > n.st.Round {
		n.st = Status{Round: round, Leader: UID{}}
		n.electionTimer = 0
		n.acks.reset()
	}
}

// Step processes one received message at time now.
func (n *Node) Step(now time.Duration, m Message) []Message {
	n.out, n.now = n.out[:0], now
	if !m.Type.Valid() || m.Ack && !acked(m.Type) {
		return n.out // garbage
	}
	if m.Ack {
		n.acknowledged(m)
		return n.out
	}
	if n.acks.covers(m) {
		// Acknowledged whatever becomes of it — stale, straggler or
		// duplicate —: it was delivered, and the sender must stop.
		n.out = append(n.out, ack(n.cfg.Self, m))
		if n.acks.duplicate(m) {
			return n.out
		}
	}
	if m.Round < n.st.Round {
		return n.out // stale round
	}
	if m.Hops > uint32(n.ring.Len()) {
		return n.out // its candidate died: the message would circle forever
	}
	if m.Type == MsgHeartbeat {
		n.heartbeat(now, m)
		return n.out
	}
	// A current message proves its sender alive, and its candidate too,
	// which started or forwarded it in this round: down marks are
	// suspicions, and evidence of life lifts them. Without this a live
	// node once marked down could be skipped for good and its own
	// candidacy never come back to it.
	n.MarkUp(m.From)
	if m.Type != MsgEnd {
		n.MarkUp(m.Cand)
	}
	if m.Type == MsgElection && m.Round > n.st.Round {
		n.forgetDown()
		n.suspectQuietLeader(now)
	}
	n.adopt(m.Round)
	switch m.Type {
	case MsgElection:
		n.election(now, m)
	case MsgElected:
		n.elected(now, m)
	case MsgEnd:
		n.st.Blocked = false
	}
	return n.out
}

func (n *Node) election(now time.Duration, m Message) {
	if n.st.Blocked || !n.st.Leader.IsZero() {
		// This round is decided: a straggler. The paper's block covers
		// ELECTED→END; END can overtake a slow straggler, so the decided
		// round keeps discarding after END too. New elections come in a
		// new round.
		return
	}
	switch m.Cand.Cmp(n.cfg.Self) {
	case 1:
		if !n.st.Participant {
			n.st.Participant = true
			n.armElection(now)
		}
		n.forwardElection(now, m.Cand, m.Hops+1)
	case -1:
		if n.st.Participant {
			return
		}
		n.st.Participant = true
		n.armElection(now)
		n.forwardElection(now, n.cfg.Self, 1)
	default:
		if n.st.Participant {
			n.win(now)
		}
	}
}

func (n *Node) elected(now time.Duration, m Message) {
	if m.Cand == n.cfg.Self {
		if n.st.Announcing {
			n.finish(now)
		}
		return
	}
	if m.Cand.Less(n.cfg.Self) {
		n.challenge(now)
		return
	}
	n.st.Leader, n.st.Participant, n.st.Blocked, n.st.Announcing = m.Cand, false, true, false
	n.electionTimer = 0
	if n.det != nil {
		n.det.Heard(now)
	}
	succ := n.successor()
	if succ != n.cfg.Self {
		n.send(MsgElected, succ, m.Cand, m.Hops+1)
	}
}

// challenge answers a leader smaller than this node: the election that
// chose it passed this node by — a predecessor that had missed its
// heartbeats marked it down, or its own candidacy was lost — yet it is
// alive and the larger UID. Following would leave the ring without its
// max live UID as leader for good (ring-chaos: 1 in 1,000 runs at 2 %
// loss), so it starts a newer round instead; its ELECTION marks it up
// wherever it passes, so it comes back to it and it wins.
func (n *Node) challenge(now time.Duration) {
	n.stats.Challenges++
	n.start(now)
}

func (n *Node) heartbeat(now time.Duration, m Message) {
	n.MarkUp(m.From)
	if m.Round > n.st.Round && m.Cand.Less(n.cfg.Self) {
		// A smaller leader won a newer round without this node: see
		// challenge. Taking part in (or announcing) an older round does
		// not excuse it — that round's candidacy was lost with the round,
		// and following here would leave the smaller leader for good.
		n.adopt(m.Round)
		n.challenge(now)
		return
	}
	if m.Round > n.st.Round || !n.st.Participant && !n.st.Announcing {
		// A newer round, or we are at rest: follow the sender.
		if m.Round > n.st.Round || n.st.Leader.IsZero() || n.st.Leader == m.Cand {
			n.st = Status{Leader: m.Cand, Round: m.Round}
			n.electionTimer = 0
		}
	}
	if n.det != nil && n.st.Leader == m.Cand {
		n.det.Heard(now)
	}
}

// acknowledged drops the pending hop that ack answers.
func (n *Node) acknowledged(ack Message) {
	n.MarkUp(ack.From)
	n.acks.drop(ack.From, ack)
}

// Unreachable tells the node that m could not be delivered to m.To. The
// member is marked down and an election or elected message goes on to the
// next live successor, so a dead successor is skipped.
func (n *Node) Unreachable(now time.Duration, m Message) []Message {
	n.out, n.now = n.out[:0], now
	n.acks.drop(m.To, m)
	n.unreachable(now, m)
	return n.out
}

func (n *Node) unreachable(now time.Duration, m Message) {
	n.MarkDown(m.To)
	if m.Round != n.st.Round {
		return
	}
	switch m.Type {
	case MsgElection:
		if n.st.Blocked {
			return
		}
		n.forwardElection(now, m.Cand, m.Hops)
	case MsgElected:
		if succ := n.successor(); succ != n.cfg.Self {
			n.send(MsgElected, succ, m.Cand, m.Hops)
		} else if m.Cand == n.cfg.Self && n.st.Announcing {
			n.finish(now)
		}
	}
}

// Tick fires whatever timers are due at now: the election-restart timeout,
// the failure detector, and the leader's heartbeats.
func (n *Node) Tick(now time.Duration) []Message {
	n.out, n.now = n.out[:0], now
	n.retransmit(now)
	switch {
	case n.electionTimer > 0 && now >= n.electionTimer:
		n.stats.Restarts++
		n.forgetDown()
		n.start(now)
	case n.det != nil && n.st.Leader != n.cfg.Self && !n.st.Participant && !n.st.Announcing && n.det.Suspect(now):
		// The suspected coordinator is skipped: where a dead host leaves no
		// connection to refuse, a message to it would vanish and cost an
		// election timeout. Its next heartbeat marks it up again.
		n.forgetDown()
		n.MarkDown(n.st.Leader)
		n.start(now)
	}
	n.beat(now)
	return n.out
}

// retransmit sends again every pending hop whose acknowledgement is
// overdue, and gives up on those out of retries: their target is treated
// as unreachable.
func (n *Node) retransmit(now time.Duration) {
	var resent int
	var gaveUp []Message
	n.out, resent, gaveUp = n.acks.retransmit(now, n.out)
	n.stats.Retransmissions += resent
	for _, m := range gaveUp {
		n.unreachable(now, m)
	}
}

// Deadline returns the earliest instant at which Tick has work; ok is false
// when no timer is armed.
func (n *Node) Deadline() (time.Duration, bool) { return n.deadline() }
