// Package wire is the framed binary format ring members use to exchange
// election and heartbeat messages over TCP.
//
// Every frame is 72 bytes, big-endian:
//
//	offset size field
//	0      2    magic "RG" (0x52 0x47)
//	2      1    version, 3
//	3      1    type: 1 election, 2 elected, 3 end, 4 heartbeat, 16 heartbeat-ack,
//	            17 lease ask, 18 lease answer (lease.go);
//	            0x80 | 1 or 2: the per-hop acknowledgement of an election or elected
//	4      2    body length, 66 since version 2
//	6      16   from UID (MD5 of "ip:port")
//	22     16   to UID
//	38     16   candidate UID (the leader for every type but election)
//	54     8    round
//	62     4    hops since the candidate was written
//	66     1    kind: the election algorithm's own message kind (ring.Message.Kind)
//	67     1    direction: 0 next, 1 previous, 2 direct (ring.Dir)
//	68     4    phase (ring.Message.Phase)
//
// Version 1 (Chang–Roberts only) ended at offset 66; version 2 carries
// what every algorithm of the ring package needs; version 3, the same 72
// bytes, lets a lease ask carry its sender's answer (lease.go), which a
// version-2 server would drop unread, leaving its peers unleased. A
// server speaks one version and names the other's in its error.
//
// A fixed length keeps the decoder trivial to validate; the length field
// is there so a later version can grow the body and old readers can say
// precisely why they reject it.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/ringside/ringside/ring"
)

const (
	// Version is the wire format version this package speaks.
	Version = 3
	// HeaderSize is the fixed header in front of the body.
	HeaderSize = 6
	// BodySize is the body length since version 2.
	BodySize = 66
	// FrameSize is a whole frame.
	FrameSize = HeaderSize + BodySize
	// MsgHeartbeatAck is a server's answer to the coordinator's heartbeat:
	// the second side of the two-sided heartbeat. The ring state machine
	// never sees it; the coordinator's health checker does.
	MsgHeartbeatAck ring.MsgType = 16
	// ackBit marks a per-hop acknowledgement (ring.Message.Ack) in the
	// type byte.
	ackBit = 0x80
)

var magic = [2]byte{'R', 'G'}

// ErrMalformed wraps every decoding error.
var ErrMalformed = errors.New("malformed frame")

// Append appends the frame of m to b.
func Append(b []byte, m ring.Message) []byte {
	var f [FrameSize]byte
	typ := byte(m.Type)
	if m.Ack {
		typ |= ackBit
	}
	f[0], f[1], f[2], f[3] = magic[0], magic[1], Version, typ
	binary.BigEndian.PutUint16(f[4:], BodySize)
	from, to, cand := m.From.Bytes(), m.To.Bytes(), m.Cand.Bytes()
	copy(f[6:], from[:])
	copy(f[22:], to[:])
	copy(f[38:], cand[:])
	binary.BigEndian.PutUint64(f[54:], m.Round)
	binary.BigEndian.PutUint32(f[62:], m.Hops)
	f[66], f[67] = m.Kind, byte(m.Dir)
	binary.BigEndian.PutUint32(f[68:], m.Phase)
	return append(b, f[:]...)
}

// Decode parses one frame from the start of b.
func Decode(b []byte) (ring.Message, error) {
	if err := checkHeader(b); err != nil {
		return ring.Message{}, err
	}
	if len(b) < FrameSize {
		return ring.Message{}, fmt.Errorf("%w: truncated body, %d of %d bytes", ErrMalformed, len(b)-HeaderSize, BodySize)
	}
	if d := ring.Dir(b[67]); d > ring.DirDirect {
		return ring.Message{}, fmt.Errorf("%w: direction %d, want 0 (next), 1 (previous) or 2 (direct)", ErrMalformed, d)
	}
	return ring.Message{
		Type:  ring.MsgType(b[3] &^ ackBit),
		Ack:   b[3]&ackBit != 0,
		From:  ring.UIDFromBytes([16]byte(b[6:22])),
		To:    ring.UIDFromBytes([16]byte(b[22:38])),
		Cand:  ring.UIDFromBytes([16]byte(b[38:54])),
		Round: binary.BigEndian.Uint64(b[54:]),
		Hops:  binary.BigEndian.Uint32(b[62:]),
		Kind:  b[66],
		Dir:   ring.Dir(b[67]),
		Phase: binary.BigEndian.Uint32(b[68:]),
	}, nil
}

func checkHeader(b []byte) error {
	if len(b) < HeaderSize {
		return fmt.Errorf("%w: %d bytes, header needs %d", ErrMalformed, len(b), HeaderSize)
	}
	if b[0] != magic[0] || b[1] != magic[1] {
		return fmt.Errorf("%w: magic %q, want \"RG\"", ErrMalformed, b[:2])
	}
	if b[2] != Version {
		return fmt.Errorf("%w: version %d, want %d", ErrMalformed, b[2], Version)
	}
	switch typ := ring.MsgType(b[3] &^ ackBit); {
	case b[3]&ackBit != 0 && typ != ring.MsgElection && typ != ring.MsgElected:
		return fmt.Errorf("%w: acknowledgement of type %d, only election and elected are acknowledged", ErrMalformed, typ)
	case !typ.Valid() && typ != MsgHeartbeatAck && typ != MsgLeaseAsk && typ != MsgLeaseAnswer:
		return fmt.Errorf("%w: unknown type %d", ErrMalformed, b[3])
	}
	if n := binary.BigEndian.Uint16(b[4:]); n != BodySize {
		return fmt.Errorf("%w: body length %d, want %d", ErrMalformed, n, BodySize)
	}
	return nil
}

// Read reads one frame from r. io.EOF means a clean end between frames;
// a malformed header is reported before its body is read, so a stream of
// garbage is rejected at once.
func Read(r io.Reader, buf *[FrameSize]byte) (ring.Message, error) {
	if _, err := io.ReadFull(r, buf[:HeaderSize]); err != nil {
		return ring.Message{}, err
	}
	if err := checkHeader(buf[:HeaderSize]); err != nil {
		return ring.Message{}, err
	}
	if _, err := io.ReadFull(r, buf[HeaderSize:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return ring.Message{}, err
	}
	return Decode(buf[:])
}
