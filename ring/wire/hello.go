package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// A connection between ring members opens with a hello frame that proves
// the sender holds the cluster secret, so a client on the shared port
// cannot inject ELECTED or heartbeat frames and take the ring over:
//
//	offset size field
//	0      2    magic "RG"
//	2      1    version, 1
//	3      1    type 32, hello
//	4      2    body length, 32
//	6      32   HMAC-SHA256(secret, "ringside ring peer v1")
//
// The proof is as strong as the X-Ringside-Secret header on the peer HTTP
// endpoints: a shared secret on a network the ring trusts not to be
// sniffed (no TLS here).
const (
	// MsgHello opens every peer connection.
	MsgHello = 32
	// HelloSize is a whole hello frame.
	HelloSize = HeaderSize + helloBody
	helloBody = sha256.Size
)

// ErrNoSecret is wrapped when a hello carries the wrong proof.
var ErrNoSecret = errors.New("peer does not hold the cluster secret")

// Proof is what a hello carries for secret.
func Proof(secret string) [sha256.Size]byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("ringside ring peer v1"))
	return [sha256.Size]byte(m.Sum(nil))
}

// AppendHello appends the hello frame carrying proof to b.
func AppendHello(b []byte, proof [sha256.Size]byte) []byte {
	b = append(b, magic[0], magic[1], Version, MsgHello, 0, helloBody)
	return append(b, proof[:]...)
}

// ReadHello reads the hello that must open a peer connection and checks
// its proof in constant time. Anything but a well-formed hello is
// ErrMalformed; a hello with the wrong proof is ErrNoSecret.
func ReadHello(r io.Reader, want [sha256.Size]byte) error {
	var f [HelloSize]byte
	if _, err := io.ReadFull(r, f[:HeaderSize]); err != nil {
		return err
	}
	switch {
	case f[0] != magic[0] || f[1] != magic[1]:
		return fmt.Errorf("%w: magic %q, want \"RG\"", ErrMalformed, f[:2])
	case f[2] != Version:
		return fmt.Errorf("%w: version %d, want %d", ErrMalformed, f[2], Version)
	case f[3] != MsgHello:
		return fmt.Errorf("%w: type %d before the hello: a peer connection opens with a hello (type %d)", ErrMalformed, f[3], MsgHello)
	case f[4] != 0 || f[5] != helloBody:
		return fmt.Errorf("%w: hello body length %d, want %d", ErrMalformed, int(f[4])<<8|int(f[5]), helloBody)
	}
	if _, err := io.ReadFull(r, f[HeaderSize:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if !hmac.Equal(f[HeaderSize:], want[:]) {
		return ErrNoSecret
	}
	return nil
}
