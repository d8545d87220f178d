package ring

import "fmt"

// MsgType is the kind of a ring protocol message.
type MsgType uint8

const (
	// MsgElection carries a candidate UID clockwise around the ring.
	MsgElection MsgType = iota + 1
	// MsgElected announces the winner; it travels once around the ring.
	MsgElected
	// MsgEnd is the winner's end-of-election broadcast: receivers unblock.
	MsgEnd
	// MsgHeartbeat goes from the coordinator to every server; it carries
	// the coordinator's UID and round so a restarted server catches up.
	MsgHeartbeat
	msgTypeCount
)

// MsgTypes lists every message type, in wire order.
var MsgTypes = []MsgType{MsgElection, MsgElected, MsgEnd, MsgHeartbeat}

func (t MsgType) String() string {
	switch t {
	case MsgElection:
		return "election"
	case MsgElected:
		return "elected"
	case MsgEnd:
		return "end"
	case MsgHeartbeat:
		return "heartbeat"
	}
	return fmt.Sprintf("msgtype(%d)", uint8(t))
}

// Valid reports whether t is a known message type.
func (t MsgType) Valid() bool { return t >= MsgElection && t < msgTypeCount }

// Message is one protocol message. Cand is the candidate for MsgElection and
// the leader for every other type.
type Message struct {
	Type     MsgType
	From, To UID
	Cand     UID
	// Round numbers elections. A restart after a lost message opens a new
	// round; a higher round resets the participant flag, so stale
	// participants from an abandoned round cannot swallow the new one.
	Round uint64
	// Hops counts hops since Cand was last written. A candidate's own
	// message returns to it within len(ring) hops; more means the
	// candidate died, and the message is dropped instead of circling forever.
	Hops uint32
	// Ack marks a per-hop acknowledgement (Config.AckTimeout) of the
	// ELECTION or ELECTED message of Type, From=To's peer, with the same
	// Cand, Round and Hops: it travels back to the sender.
	Ack bool
	// Resent marks a retransmission of an unacknowledged message. It is
	// not on the wire; it lets transports and the simulator count
	// retransmissions apart from the algorithm's own messages.
	Resent bool
	// Kind, Phase and Dir belong to the algorithm that sent an ELECTION
	// (see Core): its own message kind (a probe or a reply, say), its
	// phase, and the way it travels. Chang–Roberts leaves them zero:
	// DirNext, its only direction.
	Kind  uint8
	Phase uint32
	Dir   Dir
}

// Dir is the way a message travels: to the next live member clockwise, to
// the previous one, or straight to the member named in To.
type Dir uint8

const (
	DirNext Dir = iota
	DirPrev
	DirDirect
)

func (d Dir) String() string {
	switch d {
	case DirNext:
		return "next"
	case DirPrev:
		return "prev"
	case DirDirect:
		return "direct"
	}
	return fmt.Sprintf("dir(%d)", uint8(d))
}

// Reverse is the opposite direction along the ring (DirDirect stays).
func (d Dir) Reverse() Dir {
	switch d {
	case DirNext:
		return DirPrev
	case DirPrev:
		return DirNext
	}
	return d
}

// sameHop reports whether a and b are the same hop of the same message:
// what an acknowledgement and a duplicate are recognised by.
func sameHop(a, b Message) bool {
	return a.Type == b.Type && a.Cand == b.Cand && a.Round == b.Round && a.Hops == b.Hops &&
		a.Kind == b.Kind && a.Phase == b.Phase && a.Dir == b.Dir
}

// acked reports whether t is a type that per-hop acknowledgement covers:
// the ring messages whose loss stalls an election. END is a broadcast and
// heartbeats repeat anyway.
func acked(t MsgType) bool { return t == MsgElection || t == MsgElected }
