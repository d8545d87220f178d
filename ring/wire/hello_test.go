package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHello(t *testing.T) {
	proof := Proof("ring-secret-for-tests")
	hello := AppendHello(nil, proof)
	require.Len(t, hello, HelloSize)
	require.NoError(t, ReadHello(bytes.NewReader(hello), proof))

	assert.ErrorIs(t, ReadHello(bytes.NewReader(AppendHello(nil, Proof("another-secret-16+"))), proof), ErrNoSecret)
	assert.NotEqual(t, Proof(""), proof)

	// A ring frame without a hello first is refused, naming the problem.
	err := ReadHello(bytes.NewReader(Append(nil, sample())), proof)
	assert.ErrorIs(t, err, ErrMalformed)
	assert.ErrorContains(t, err, "opens with a hello")
	assert.ErrorIs(t, ReadHello(bytes.NewReader(hello[:HelloSize-1]), proof), io.ErrUnexpectedEOF)
	assert.ErrorIs(t, ReadHello(bytes.NewReader(nil), proof), io.EOF)
}

// ReadHello accepts exactly the hello of the secret and consumes nothing
// past it.
func FuzzReadHello(f *testing.F) {
	proof := Proof("fuzz-secret-0123456789")
	f.Add(AppendHello(nil, proof))
	f.Add(AppendHello(nil, Proof("x")))
	f.Add(Append(nil, sample()))
	f.Add([]byte("RG\x01\x20\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		err := ReadHello(r, proof)
		valid := len(b) >= HelloSize && bytes.Equal(b[:HelloSize], AppendHello(nil, proof))
		if (err == nil) != valid {
			t.Fatalf("ReadHello(%x) = %v, valid hello %v", b, err, valid)
		}
		if err == nil && r.Len() != len(b)-HelloSize {
			t.Fatalf("read %d bytes past the hello", len(b)-HelloSize-r.Len())
		}
		if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNoSecret) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("unexpected error kind: %v", err)
		}
	})
}
