package wire

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// A connection between ring members opens with a handshake that proves
// the dialler holds the cluster secret, so a client on the shared port
// cannot inject ELECTED or heartbeat frames and take the ring over. It is
// a challenge–response: the proof covers a nonce the listener drew for
// this connection, so a handshake someone saw once cannot be replayed.
//
//	dialler  → listener  hello      "RG" 1 type 32, body length 0
//	listener → dialler   challenge  "RG" 1 type 33, body length 32: a random nonce
//	dialler  → listener  proof      "RG" 1 type 34, body length 32:
//	                                HMAC-SHA256(secret, "ringside ring peer v2" ‖ nonce)
//
// Ring frames follow the proof. The hello comes first because the
// listener's port also serves HTTP: a connection is told apart by its
// first two bytes. The proof is as strong as the X-Ringside-Secret header
// on the peer HTTP endpoints: a shared secret on a network the ring trusts
// not to be sniffed (no TLS here).
const (
	// MsgHello opens every peer connection.
	MsgHello = 32
	// MsgChallenge is the listener's nonce.
	MsgChallenge = 33
	// MsgProof answers the challenge.
	MsgProof = 34
	// HelloSize, ChallengeSize and ProofSize are the whole frames.
	HelloSize     = HeaderSize
	ChallengeSize = HeaderSize + NonceSize
	ProofSize     = HeaderSize + sha256.Size
	// NonceSize is the challenge's length.
	NonceSize = 32
)

// ErrNoSecret is wrapped when a proof does not answer the challenge.
var ErrNoSecret = errors.New("peer does not hold the cluster secret")

// Nonce is a listener's challenge.
type Nonce [NonceSize]byte

// NewNonce draws a challenge.
func NewNonce() Nonce {
	var n Nonce
	rand.Read(n[:]) // never fails (crypto/rand panics rather than return an error)
	return n
}

// Proof is the answer to nonce for secret.
func Proof(secret string, nonce Nonce) [sha256.Size]byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("ringside ring peer v2"))
	m.Write(nonce[:])
	return [sha256.Size]byte(m.Sum(nil))
}

// AppendHello appends the hello frame to b.
func AppendHello(b []byte) []byte { return appendHead(b, MsgHello, 0) }

// AppendChallenge appends the challenge frame carrying nonce to b.
func AppendChallenge(b []byte, nonce Nonce) []byte {
	return append(appendHead(b, MsgChallenge, NonceSize), nonce[:]...)
}

// AppendProof appends the proof frame to b.
func AppendProof(b []byte, proof [sha256.Size]byte) []byte {
	return append(appendHead(b, MsgProof, sha256.Size), proof[:]...)
}

func appendHead(b []byte, typ byte, body int) []byte {
	return append(b, magic[0], magic[1], Version, typ, byte(body>>8), byte(body))
}

// ReadHello reads the hello that must open a peer connection. Anything
// else is ErrMalformed.
func ReadHello(r io.Reader) error {
	var f [HelloSize]byte
	return readFixed(r, f[:], MsgHello, "hello")
}

// ReadChallenge reads the listener's challenge.
func ReadChallenge(r io.Reader) (Nonce, error) {
	var f [ChallengeSize]byte
	err := readFixed(r, f[:], MsgChallenge, "challenge")
	return Nonce(f[HeaderSize:]), err
}

// ReadProof reads the dialler's answer and checks it against want in
// constant time: anything but a proof frame is ErrMalformed, a proof of
// another secret or nonce ErrNoSecret.
func ReadProof(r io.Reader, want [sha256.Size]byte) error {
	var f [ProofSize]byte
	if err := readFixed(r, f[:], MsgProof, "proof"); err != nil {
		return err
	}
	if !hmac.Equal(f[HeaderSize:], want[:]) {
		return ErrNoSecret
	}
	return nil
}

// readFixed reads one frame of type typ whose body fills the rest of f,
// consuming nothing past it.
func readFixed(r io.Reader, f []byte, typ byte, what string) error {
	if _, err := io.ReadFull(r, f[:HeaderSize]); err != nil {
		return err
	}
	body := len(f) - HeaderSize
	switch {
	case f[0] != magic[0] || f[1] != magic[1]:
		return fmt.Errorf("%w: magic %q, want \"RG\"", ErrMalformed, f[:2])
	case f[2] != Version:
		return fmt.Errorf("%w: version %d, want %d", ErrMalformed, f[2], Version)
	case f[3] != typ:
		return fmt.Errorf("%w: type %d where the handshake's %s (type %d) belongs", ErrMalformed, f[3], what, typ)
	case int(f[4])<<8|int(f[5]) != body:
		return fmt.Errorf("%w: %s body length %d, want %d", ErrMalformed, what, int(f[4])<<8|int(f[5]), body)
	}
	if _, err := io.ReadFull(r, f[HeaderSize:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}
