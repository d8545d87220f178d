package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/ringside/ringside/ring"
)

// The serving lease's question and answer (package ring/lease) travel on
// the ring's own connections: every member asks every other one each
// heartbeat interval, n·(n−1) exchanges, and as HTTP requests they kept a
// third of this machine's two cores busy in an idle ring of 16 — time the
// election's hops then waited for. The ring state machine never sees them.
const (
	// MsgLeaseAsk asks the receiver whether it counts the sender as a
	// member; Round carries the asker's lease round.
	MsgLeaseAsk ring.MsgType = 17
	// MsgLeaseAnswer answers an ask (LeaseAnswer).
	MsgLeaseAnswer ring.MsgType = 18
)

// The answer's kind byte.
const (
	leaseCounted    = 1 << 0
	leaseRebalanced = 1 << 1
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
	return m
}

// ParseLeaseAnswer reads a MsgLeaseAnswer. Fields an answer does not use
// must be zero, so that what a peer sent has exactly one reading.
func ParseLeaseAnswer(m ring.Message) (LeaseAnswer, error) {
	switch {
	case m.Type != MsgLeaseAnswer:
		return LeaseAnswer{}, fmt.Errorf("%w: type %d is not a lease answer", ErrMalformed, m.Type)
	case m.Kind&^(leaseCounted|leaseRebalanced) != 0:
		return LeaseAnswer{}, fmt.Errorf("%w: lease answer flags %#x, only 0x1 (counted) and 0x2 (rebalanced) are defined", ErrMalformed, m.Kind)
	case m.Kind&leaseRebalanced == 0 && !m.Cand.IsZero():
		return LeaseAnswer{}, fmt.Errorf("%w: lease answer carries an epoch without its flag", ErrMalformed)
	case m.Ack || m.Hops != 0 || m.Phase != 0 || m.Dir != ring.DirNext:
		return LeaseAnswer{}, fmt.Errorf("%w: lease answer with hops, phase, direction or acknowledgement set", ErrMalformed)
	}
	a := LeaseAnswer{Round: m.Round, Counted: m.Kind&leaseCounted != 0, HasRebalanced: m.Kind&leaseRebalanced != 0}
	if a.HasRebalanced {
		b := m.Cand.Bytes()
		a.Rebalanced = [2]uint64{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
	}
	return a, nil
}
