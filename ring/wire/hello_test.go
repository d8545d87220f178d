package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHandshake(t *testing.T) {
	const secret = "ring-secret-for-tests"
	require.NoError(t, ReadHello(bytes.NewReader(AppendHello(nil))))
	require.Len(t, AppendHello(nil), HelloSize)

	nonce := NewNonce()
	assert.NotEqual(t, nonce, NewNonce(), "a nonce per connection")
	got, err := ReadChallenge(bytes.NewReader(AppendChallenge(nil, nonce)))
	require.NoError(t, err)
	require.Equal(t, nonce, got)

	proof := Proof(secret, nonce)
	frame := AppendProof(nil, proof)
	require.Len(t, frame, ProofSize)
	require.NoError(t, ReadProof(bytes.NewReader(frame), proof))
	// Another secret, or the answer to another connection's nonce (a
	// replayed handshake), does not prove anything.
	assert.ErrorIs(t, ReadProof(bytes.NewReader(AppendProof(nil, Proof("another-secret-16+", nonce))), proof), ErrNoSecret)
	assert.ErrorIs(t, ReadProof(bytes.NewReader(AppendProof(nil, Proof(secret, NewNonce()))), proof), ErrNoSecret)

	// A ring frame where the handshake belongs is refused, naming it.
	err = ReadHello(bytes.NewReader(Append(nil, sample())))
	assert.ErrorIs(t, err, ErrMalformed)
	assert.ErrorContains(t, err, "handshake's hello")
	err = ReadProof(bytes.NewReader(Append(nil, sample())), proof)
	assert.ErrorContains(t, err, "handshake's proof")
	assert.ErrorIs(t, ReadProof(bytes.NewReader(frame[:ProofSize-1]), proof), io.ErrUnexpectedEOF)
	assert.ErrorIs(t, ReadHello(bytes.NewReader(nil)), io.EOF)
}

// ReadProof accepts exactly the proof that answers the nonce and consumes
// nothing past it.
func FuzzReadProof(f *testing.F) {
	nonce := Nonce(bytes.Repeat([]byte{7}, NonceSize))
	proof := Proof("fuzz-secret-0123456789", nonce)
	f.Add(AppendProof(nil, proof))
	f.Add(AppendProof(nil, Proof("x", nonce)))
	f.Add(Append(nil, sample()))
	f.Add(AppendHello(nil))
	f.Add([]byte("RG\x01\x22\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		err := ReadProof(r, proof)
		valid := len(b) >= ProofSize && bytes.Equal(b[:ProofSize], AppendProof(nil, proof))
		if (err == nil) != valid {
			t.Fatalf("ReadProof(%x) = %v, valid proof %v", b, err, valid)
		}
		if err == nil && r.Len() != len(b)-ProofSize {
			t.Fatalf("read %d bytes past the proof", len(b)-ProofSize-r.Len())
		}
		if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNoSecret) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("unexpected error kind: %v", err)
		}
	})
}

// ReadChallenge returns the nonce of exactly a challenge frame.
func FuzzReadChallenge(f *testing.F) {
	f.Add(AppendChallenge(nil, NewNonce()))
	f.Add(AppendHello(nil))
	f.Add([]byte("RG\x01\x21\x00\x20"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ReadChallenge(bytes.NewReader(b))
		valid := len(b) >= ChallengeSize && bytes.Equal(b[:ChallengeSize], AppendChallenge(nil, Nonce(b[HeaderSize:ChallengeSize])))
		if (err == nil) != valid {
			t.Fatalf("ReadChallenge(%x) = %v, valid challenge %v", b, err, valid)
		}
		if err == nil && !bytes.Equal(n[:], b[HeaderSize:ChallengeSize]) {
			t.Fatalf("nonce %x from %x", n, b)
		}
	})
}
