package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ringside/ringside/ring"
)

// The serving lease's question and answer (package ring/lease) travel on
// the ring's own connections: every member asks every other one each
// heartbeat interval, n·(n−1) exchanges, and as HTTP requests they kept a
// third of this machine's two cores busy in an idle ring of 16 — time the
// election's hops then waited for. The ring state machine never sees them.
//
// An ask carries the asker's answer to the receiver's latest ask when it
// has one (LeaseAsk), so a pair of members exchanges two frames a
// heartbeat, not four: the answer waits for the answerer's next ask, at
// most a heartbeat, which the lease term (two heartbeats short of the
// suspect timeout) leaves room for — the lease runs from the ask, not
// from the answer. A member that is not asking the asker (it does not
// count it, or knows no metadata yet) answers on its own (LeaseAnswer).
const (
	// MsgLeaseAsk asks the receiver whether it counts the sender as a
	// member (LeaseAsk).
	MsgLeaseAsk ring.MsgType = 17
	// MsgLeaseAnswer answers an ask on its own (LeaseAnswer).
	MsgLeaseAnswer ring.MsgType = 18
)

// The kind byte of an answer, and of an ask that carries one.
const (
	leaseCounted    = 1 << 0
	leaseRebalanced = 1 << 1
	leaseAnswers    = 1 << 2 // an ask carries an answer
)

// LeaseAnswer is a member's answer to a lease ask.
type LeaseAnswer struct {
	Round   uint64 // the asker's lease round it answers
	Counted bool   // the answerer counts the asker as a member
	// Rebalanced is the metadata epoch (round, version) under which the
	// answerer last finished moving its data, when HasRebalanced.
	Rebalanced    [2]uint64
	HasRebalanced bool
}

// Message is a as a frame: Round is the lease round, kind holds the
// flags, and the candidate field — there is no candidate — the epoch,
// round then version, big-endian.
func (a LeaseAnswer) Message(from, to ring.UID) ring.Message {
	m := ring.Message{Type: MsgLeaseAnswer, From: from, To: to, Round: a.Round}
	a.put(&m)
	return m
}

// put writes a's flags and epoch into m.
func (a LeaseAnswer) put(m *ring.Message) {
	if a.Counted {
		m.Kind |= leaseCounted
	}
	if a.HasRebalanced {
		m.Kind |= leaseRebalanced
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], a.Rebalanced[0])
		binary.BigEndian.PutUint64(b[8:], a.Rebalanced[1])
		m.Cand = ring.UIDFromBytes(b)
	}
}

// ParseLeaseAnswer reads a MsgLeaseAnswer. Fields an answer does not use
// must be zero, so that what a peer sent has exactly one reading.
func ParseLeaseAnswer(m ring.Message) (LeaseAnswer, error) {
	switch {
	case m.Type != MsgLeaseAnswer:
		return LeaseAnswer{}, fmt.Errorf("%w: type %d is not a lease answer", ErrMalformed, m.Type)
	case m.Kind&^(leaseCounted|leaseRebalanced) != 0:
		return LeaseAnswer{}, fmt.Errorf("%w: lease answer flags %#x, only 0x1 (counted) and 0x2 (rebalanced) are defined", ErrMalformed, m.Kind)
	case m.Ack || m.Hops != 0 || m.Phase != 0 || m.Dir != ring.DirNext:
		return LeaseAnswer{}, fmt.Errorf("%w: lease answer with hops, phase, direction or acknowledgement set", ErrMalformed)
	}
	a, err := answerOf(m, m.Round)
	if err != nil {
		return LeaseAnswer{}, fmt.Errorf("%w: lease answer %w", ErrMalformed, err)
	}
	return a, nil
}

// answerOf reads the flags and epoch of an answer to round from m.
func answerOf(m ring.Message, round uint64) (LeaseAnswer, error) {
	if m.Kind&leaseRebalanced == 0 && !m.Cand.IsZero() {
		return LeaseAnswer{}, errors.New("carries an epoch without its flag")
	}
	a := LeaseAnswer{Round: round, Counted: m.Kind&leaseCounted != 0, HasRebalanced: m.Kind&leaseRebalanced != 0}
	if a.HasRebalanced {
		b := m.Cand.Bytes()
		a.Rebalanced = [2]uint64{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
	}
	return a, nil
}

// LeaseAsk is a member's lease ask, with its answer to the receiver's
// latest ask when HasAnswer.
type LeaseAsk struct {
	Round     uint64 // the asker's lease round
	Answer    LeaseAnswer
	HasAnswer bool
}

// Message is a as a frame: Round is the asker's round; an answer sets the
// kind's 0x4 and its own flags, puts its epoch where an answer frame does
// (the candidate field) and the round it answers in the hops (high 32
// bits) and phase (low 32) fields, which an ask has no use for.
func (a LeaseAsk) Message(from, to ring.UID) ring.Message {
	m := ring.Message{Type: MsgLeaseAsk, From: from, To: to, Round: a.Round}
	if a.HasAnswer {
		m.Kind |= leaseAnswers
		a.Answer.put(&m)
		m.Hops, m.Phase = uint32(a.Answer.Round>>32), uint32(a.Answer.Round)
	}
	return m
}

// ParseLeaseAsk reads a MsgLeaseAsk; as with an answer, fields it does
// not use must be zero.
func ParseLeaseAsk(m ring.Message) (LeaseAsk, error) {
	switch {
	case m.Type != MsgLeaseAsk:
		return LeaseAsk{}, fmt.Errorf("%w: type %d is not a lease ask", ErrMalformed, m.Type)
	case m.Kind&^(leaseCounted|leaseRebalanced|leaseAnswers) != 0:
		return LeaseAsk{}, fmt.Errorf("%w: lease ask flags %#x, only 0x1 (counted), 0x2 (rebalanced) and 0x4 (answers) are defined", ErrMalformed, m.Kind)
	case m.Ack || m.Dir != ring.DirNext:
		return LeaseAsk{}, fmt.Errorf("%w: lease ask with direction or acknowledgement set", ErrMalformed)
	case m.Kind&leaseAnswers == 0 && (m.Kind != 0 || m.Hops != 0 || m.Phase != 0):
		return LeaseAsk{}, fmt.Errorf("%w: lease ask with an answer's fields but not its flag", ErrMalformed)
	}
	a := LeaseAsk{Round: m.Round, HasAnswer: m.Kind&leaseAnswers != 0}
	if !a.HasAnswer {
		if !m.Cand.IsZero() {
			return LeaseAsk{}, fmt.Errorf("%w: lease ask carries an epoch without an answer", ErrMalformed)
		}
		return a, nil
	}
	ans, err := answerOf(m, uint64(m.Hops)<<32|uint64(m.Phase))
	if err != nil {
		return LeaseAsk{}, fmt.Errorf("%w: lease ask's answer %w", ErrMalformed, err)
	}
	a.Answer = ans
	return a, nil
}
