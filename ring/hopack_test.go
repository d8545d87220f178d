package ring

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Acknowledgements in any order, forged ones among them (hops never sent,
// numbers at their limits), keep the pending hops exact through every way
// trim drops tombstones — from the front of a long list, by moving a few
// live hops forward, and emptied — and the overdue hops retransmitted are
// exactly the unacknowledged ones, in the order they were sent.
func TestHopAcksSurviveAnyAckOrder(t *testing.T) {
	const timeout = 10 * time.Millisecond
	h := hopAcks{timeout: timeout, retries: 1}
	hop := func(k int) Message {
		return Message{Type: MsgElection, From: UID{Lo: 1}, To: UID{Lo: uint64(100 + k)}, Cand: UID{Lo: uint64(k)}, Round: 3, Hops: uint32(k)}
	}
	const sent = 40
	for k := range sent {
		h.track(0, hop(k))
	}
	forged := []Message{
		{Type: MsgElection, To: UID{Hi: math.MaxUint64, Lo: math.MaxUint64}, Cand: UID{Lo: 5}, Round: math.MaxUint64, Hops: math.MaxUint32},
		{Type: MsgElected, To: hop(5).To, Cand: hop(5).Cand, Round: 3, Hops: 5},  // another type, same hop
		{Type: MsgElection, To: hop(7).To, Cand: hop(7).Cand, Round: 2, Hops: 7}, // an older round
	}
	acked := map[int]bool{}
	ack := func(k int) {
		h.drop(hop(k).To, hop(k))
		acked[k] = true
	}
	// The front five: tombstones before 35 live hops (sliced off).
	for k := range 5 {
		ack(k)
	}
	for _, m := range forged {
		h.drop(m.To, m)
	}
	// Every other one of the middle, then the rest of the front: a few
	// live hops behind many tombstones (moved forward).
	for k := 6; k < 30; k += 2 {
		ack(k)
	}
	for k := 5; k < 30; k += 2 {
		ack(k)
	}
	h.drop(hop(3).To, hop(3)) // acknowledged twice
	require.Len(t, h.pend, sent-len(acked))

	out, resent, gaveUp := h.retransmit(timeout, nil)
	var want []Message
	for k := range sent {
		if !acked[k] {
			m := hop(k)
			m.Resent = true
			want = append(want, m)
		}
	}
	assert.Equal(t, want, out)
	assert.Equal(t, len(want), resent)
	assert.Empty(t, gaveUp)

	// Acknowledge every resent hop: nothing is left pending or due.
	for _, m := range out {
		h.drop(m.To, m)
	}
	assert.Empty(t, h.pend)
	_, due := h.deadline()
	assert.False(t, due)
	out, _, gaveUp = h.retransmit(10*timeout, nil)
	assert.Empty(t, out)
	assert.Empty(t, gaveUp)
}
