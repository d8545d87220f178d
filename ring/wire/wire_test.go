package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/ring"
)

func sample() ring.Message {
	return ring.Message{Type: ring.MsgElection, From: ring.UIDOf("a:1"), To: ring.UIDOf("b:2"), Cand: ring.UIDOf("c:3"), Round: 1 << 40, Hops: 7,
		Kind: 3, Dir: ring.DirPrev, Phase: 1<<32 - 1}
}

func TestRoundTrip(t *testing.T) {
	for _, typ := range append(ring.MsgTypes, MsgHeartbeatAck) {
		m := sample()
		m.Type = typ
		b := Append(nil, m)
		require.Len(t, b, FrameSize)
		got, err := Decode(b)
		require.NoError(t, err)
		assert.Equal(t, m, got)
		var buf [FrameSize]byte
		got, err = Read(bytes.NewReader(b), &buf)
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
	for _, typ := range []ring.MsgType{ring.MsgElection, ring.MsgElected} {
		m := sample()
		m.Type, m.Ack = typ, true
		got, err := Decode(Append(nil, m))
		require.NoError(t, err)
		assert.Equal(t, m, got, "an acknowledgement keeps its type")
	}
	m := sample()
	m.Resent = true
	got, err := Decode(Append(nil, m))
	require.NoError(t, err)
	assert.False(t, got.Resent, "a retransmission looks like the original on the wire")
}

func TestMalformedFramesNameTheProblem(t *testing.T) {
	good := Append(nil, sample())
	mutate := func(i int, v byte) []byte { b := bytes.Clone(good); b[i] = v; return b }
	for _, tc := range []struct {
		b    []byte
		want string
	}{
		{good[:3], "header needs 6"},
		{mutate(0, 'X'), "magic"},
		{mutate(2, 9), "version 9"},
		{mutate(3, 99), "unknown type 99"},
		{mutate(3, 0x83), "acknowledgement of type 3"},
		{mutate(3, 0x90), "acknowledgement of type 16"},
		{mutate(5, 61), "body length 61"},
		{mutate(2, 1), "version 1, want 3"},
		{mutate(2, 2), "version 2, want 3"},
		{mutate(67, 3), "direction 3"},
		{good[:20], "truncated body"},
	} {
		_, err := Decode(tc.b)
		require.Error(t, err)
		assert.True(t, errors.Is(err, ErrMalformed))
		assert.Contains(t, err.Error(), tc.want)
	}
	var buf [FrameSize]byte
	_, err := Read(bytes.NewReader(good[:30]), &buf)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = Read(bytes.NewReader(nil), &buf)
	assert.ErrorIs(t, err, io.EOF)
	_, err = Read(bytes.NewReader([]byte("GET / HTTP/1.1\r\n")), &buf)
	assert.ErrorContains(t, err, "magic")
}

func FuzzDecode(f *testing.F) {
	f.Add(Append(nil, sample()))
	f.Add([]byte("RG\x03\x04\x00\x42"))
	f.Add(Append(nil, ring.Message{Type: ring.MsgElected, Ack: true}))
	f.Add([]byte{})
	f.Add(Append(nil, LeaseAnswer{Round: 7, Counted: true, Rebalanced: [2]uint64{3, 9}, HasRebalanced: true}.Message(ring.UIDOf("a:1"), ring.UIDOf("b:2"))))
	f.Add(Append(nil, LeaseAsk{Round: 8, HasAnswer: true, Answer: LeaseAnswer{Round: 1<<40 | 3, Counted: true}}.Message(ring.UIDOf("a:1"), ring.UIDOf("b:2"))))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not wrapped: %v", err)
			}
			return
		}
		if again := Append(nil, m); !bytes.Equal(again, b[:FrameSize]) {
			t.Fatalf("decode/encode not inverse")
		}
		// A lease frame has one reading: what parses re-encodes to the
		// same message.
		switch m.Type {
		case MsgLeaseAnswer:
			oneReading(t, m, ParseLeaseAnswer)
		case MsgLeaseAsk:
			oneReading(t, m, ParseLeaseAsk)
		}
	})
}

// oneReading checks that a frame parse accepts re-encodes to itself and
// that a refusal is ErrMalformed.
func oneReading[T interface {
	Message(from, to ring.UID) ring.Message
}](t *testing.T, m ring.Message, parse func(ring.Message) (T, error)) {
	v, err := parse(m)
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("error not wrapped: %v", err)
		}
		return
	}
	if again := v.Message(m.From, m.To); again != m {
		t.Fatalf("lease frame re-encodes to %+v, not %+v", again, m)
	}
}
