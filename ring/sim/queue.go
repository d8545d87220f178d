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

// queue is a binary min-heap of events by (at, seq). Written out rather than
// container/heap, whose interface boxing allocates on every push.
type queue struct{ ev []event }

func (q *queue) less(i, j int) bool {
	a, b := &q.ev[i], &q.ev[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

func (q *queue) push(e event) {
	q.ev = append(q.ev, e)
	i := len(q.ev) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.ev[i], q.ev[p] = q.ev[p], q.ev[i]
		i = p
	}
}

func (q *queue) pop() event {
	top := q.ev[0]
	last := len(q.ev) - 1
	q.ev[0] = q.ev[last]
	q.ev = q.ev[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && q.less(l, m) {
			m = l
		}
		if r < last && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q.ev[i], q.ev[m] = q.ev[m], q.ev[i]
		i = m
	}
	return top
}
