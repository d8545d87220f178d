package wire

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/ring"
)

func TestLeaseAnswerRoundTrip(t *testing.T) {
	from, to := ring.UIDOf("10.0.0.1:7000"), ring.UIDOf("10.0.0.2:7000")
	for _, a := range []LeaseAnswer{
		{},
		{Round: 1, Counted: true},
		{Round: math.MaxUint64, Counted: true, HasRebalanced: true, Rebalanced: [2]uint64{math.MaxUint64, math.MaxUint64}},
		{Round: 5, HasRebalanced: true}, // epoch 0.0: rebalanced under the first metadata
	} {
		m, err := Decode(Append(nil, a.Message(from, to)))
		require.NoError(t, err)
		assert.Equal(t, from, m.From)
		assert.Equal(t, to, m.To)
		got, err := ParseLeaseAnswer(m)
		require.NoError(t, err)
		assert.Equal(t, a, got)
	}
}

func TestLeaseAnswerMalformed(t *testing.T) {
	good := LeaseAnswer{Round: 2, Counted: true}.Message(ring.UIDOf("a:1"), ring.UIDOf("b:2"))
	for _, tc := range []struct {
		mutate func(*ring.Message)
		want   string
	}{
		{func(m *ring.Message) { m.Type = MsgLeaseAsk }, "not a lease answer"},
		{func(m *ring.Message) { m.Kind = 0x84 }, "flags 0x84"},
		{func(m *ring.Message) { m.Cand = ring.UIDOf("x:1") }, "epoch without its flag"},
		{func(m *ring.Message) { m.Hops = 1 }, "hops, phase"},
		{func(m *ring.Message) { m.Dir = ring.DirPrev }, "hops, phase"},
	} {
		m := good
		tc.mutate(&m)
		_, err := ParseLeaseAnswer(m)
		require.ErrorIs(t, err, ErrMalformed)
		assert.ErrorContains(t, err, tc.want)
	}
}

func TestLeaseAskRoundTrip(t *testing.T) {
	from, to := ring.UIDOf("10.0.0.1:7000"), ring.UIDOf("10.0.0.2:7000")
	for _, a := range []LeaseAsk{
		{},
		{Round: 1},
		{Round: 2, HasAnswer: true}, // answers round 0, not counted
		{Round: math.MaxUint64, HasAnswer: true, Answer: LeaseAnswer{Round: math.MaxUint64, Counted: true, HasRebalanced: true, Rebalanced: [2]uint64{math.MaxUint64, 1}}},
		{Round: 9, HasAnswer: true, Answer: LeaseAnswer{Round: 1 << 32, Counted: true}},
		{Round: 9, HasAnswer: true, Answer: LeaseAnswer{Round: 1<<32 - 1, HasRebalanced: true}},
	} {
		m, err := Decode(Append(nil, a.Message(from, to)))
		require.NoError(t, err)
		got, err := ParseLeaseAsk(m)
		require.NoError(t, err)
		assert.Equal(t, a, got)
	}
}

func TestLeaseAskMalformed(t *testing.T) {
	plain := LeaseAsk{Round: 2}.Message(ring.UIDOf("a:1"), ring.UIDOf("b:2"))
	answering := LeaseAsk{Round: 2, HasAnswer: true, Answer: LeaseAnswer{Round: 1}}.Message(ring.UIDOf("a:1"), ring.UIDOf("b:2"))
	for _, tc := range []struct {
		m      ring.Message
		mutate func(*ring.Message)
		want   string
	}{
		{plain, func(m *ring.Message) { m.Type = MsgLeaseAnswer }, "not a lease ask"},
		{plain, func(m *ring.Message) { m.Kind = 0x8 }, "flags 0x8"},
		{plain, func(m *ring.Message) { m.Kind = leaseCounted }, "but not its flag"},
		{plain, func(m *ring.Message) { m.Phase = 1 }, "but not its flag"},
		{plain, func(m *ring.Message) { m.Cand = ring.UIDOf("x:1") }, "epoch without an answer"},
		{plain, func(m *ring.Message) { m.Dir = ring.DirDirect }, "direction"},
		{answering, func(m *ring.Message) { m.Cand = ring.UIDOf("x:1") }, "epoch without its flag"},
		{answering, func(m *ring.Message) { m.Ack = true }, "acknowledgement"},
	} {
		m := tc.m
		tc.mutate(&m)
		_, err := ParseLeaseAsk(m)
		require.ErrorIs(t, err, ErrMalformed)
		assert.ErrorContains(t, err, tc.want)
	}
}
