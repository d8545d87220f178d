package sim

import (
	"time"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/membership"
)

type eventKind uint8

const (
	evDeliver eventKind = iota
	evUnreachable
	evTick
	evStart
	evCrash
	evRestart
	evPartition
	evHeal
	evAck  // a heartbeat ack reaches the coordinator role
	evMeta // pushed metadata reaches a member
)

type event struct {
	at   time.Duration
	seq  uint64 // FIFO among equal times, for determinism
	kind eventKind
	node int32
	aux  uint32 // tick generation, target incarnation, or partition index
	msg  ring.Message
	meta *membership.Metadata // evMeta
}

// queue is a min-heap of events by (at, seq). The heap orders small keys
// and the events wait in a slab beside it: sifting then moves 24 bytes
// without pointers instead of whole events, which dominated LeLann's n²
// messages at n = 1,024. It is 4-ary: half a binary heap's depth, and a
// node's four children share two cache lines — Bully keeps O(n²)
// messages in flight (every member that runs an election writes to all
// above it), a heap far larger than the caches, where every level of a
// pop is a miss. Keys are unique (seq), so the
// pop order is the same for any heap. Written out rather than
// container/heap, whose interface boxing allocates on every push.
type queue struct {
	keys []eventKey
	// slab holds the events in chunks of slabChunk: it grows without
	// copying what it holds (Bully's O(n²) events of ~100 bytes each).
	slab [][]event
	used int32   // slots handed out so far
	free []int32 // unused slab slots
}

// slabChunk is 256 events (~25 KB): a simulation is made per election,
// and ring-messages makes 28,800 of a few dozen events each, so chunks of
// 4,096 (~400 KB, zeroed) went mostly to allocating, clearing and
// collecting (`ringside run ring-messages`, three alternating runs: 8.8–
// 10.1 s with 4,096, 6.4–7.5 s with 256, the same CSV).
const slabChunk = 256

func (q *queue) at(slot int32) *event { return &q.slab[slot/slabChunk][slot%slabChunk] }

// arity is the heap's fan-out.
const arity = 4

type eventKey struct {
	at   time.Duration
	seq  uint64
	slot int32
}

func (q *queue) len() int { return len(q.keys) }

// next is the time of the earliest event; the queue must not be empty.
func (q *queue) next() time.Duration { return q.keys[0].at }

func (q *queue) less(i, j int) bool {
	a, b := &q.keys[i], &q.keys[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

func (q *queue) push(e event) {
	var slot int32
	if n := len(q.free); n > 0 {
		slot, q.free = q.free[n-1], q.free[:n-1]
	} else {
		slot = q.used
		q.used++
		if int(slot/slabChunk) == len(q.slab) {
			q.slab = append(q.slab, make([]event, slabChunk))
		}
	}
	*q.at(slot) = e
	q.keys = append(q.keys, eventKey{e.at, e.seq, slot})
	i := len(q.keys) - 1
	for i > 0 {
		p := (i - 1) / arity
		if !q.less(i, p) {
			break
		}
		q.keys[i], q.keys[p] = q.keys[p], q.keys[i]
		i = p
	}
}

func (q *queue) pop() event {
	slot := q.keys[0].slot
	e := q.at(slot)
	top := *e
	*e = event{} // drop its metadata pointer
	q.free = append(q.free, slot)
	last := len(q.keys) - 1
	q.keys[0] = q.keys[last]
	q.keys = q.keys[:last]
	for i := 0; ; {
		first := arity*i + 1
		if first >= last {
			break
		}
		m := first
		for c := first + 1; c < min(first+arity, last); c++ {
			if q.less(c, m) {
				m = c
			}
		}
		if !q.less(m, i) {
			break
		}
		q.keys[i], q.keys[m] = q.keys[m], q.keys[i]
		i = m
	}
	return top
}
