package ring

import (
	"fmt"
	"slices"
)

// liveness is a member's view of the ring: the metadata it uses and which
// members it has found down. Every election machine embeds it; messages
// along the ring skip the members marked down.
type liveness struct {
	self UID
	ring *Ring
	down []bool
	// downAt lists the indices marked down, so that MarkUp — run for the
	// sender of every message received — compares u with the few members
	// down instead of looking its index up (at n = 1,024 the look-up was a
	// quarter of ring-failover-sim's time).
	downAt []int
	pos    int
}

// liveMembers counts the members not marked down, self included.
func (l *liveness) liveMembers() int { return l.ring.Len() - len(l.downAt) }

func (l *liveness) setRing(r *Ring) error {
	if r == nil {
		return fmt.Errorf("no ring")
	}
	pos := r.Index(l.self)
	if pos < 0 {
		return fmt.Errorf("self %s is not in the ring of %d members", l.self.Short(), r.Len())
	}
	l.ring, l.pos = r, pos
	l.down = make([]bool, r.Len())
	l.downAt = l.downAt[:0]
	return nil
}

// Self returns the member's UID.
func (l *liveness) Self() UID { return l.self }

// Ring returns the membership the member uses.
func (l *liveness) Ring() *Ring { return l.ring }

// IsDown reports whether the member considers u down.
func (l *liveness) IsDown(u UID) bool {
	i := l.ring.Index(u)
	return i >= 0 && l.down[i]
}

// MarkDown records that u is unreachable; messages skip it from now on.
func (l *liveness) MarkDown(u UID) {
	if i := l.ring.Index(u); i >= 0 && i != l.pos && !l.down[i] {
		l.down[i] = true
		l.downAt = append(l.downAt, i)
	}
}

// scanDown is how many members down MarkUp compares a sender with before
// it looks the sender's index up instead.
const scanDown = 8

// MarkUp records that u is reachable again (it rejoined).
func (l *liveness) MarkUp(u UID) {
	k := -1
	if len(l.downAt) <= scanDown {
		k = slices.IndexFunc(l.downAt, func(i int) bool { return l.ring.order[i] == u })
	} else if i := l.ring.Index(u); i >= 0 && l.down[i] {
		k = slices.Index(l.downAt, i)
	}
	if k < 0 {
		return
	}
	l.down[l.downAt[k]] = false
	l.downAt = slices.Delete(l.downAt, k, k+1)
}

// forgetDown lifts every down mark as a new round begins. A mark is a
// suspicion, lifted by evidence of life, but the evidence may never come:
// a live server that its predecessor marked down (its acknowledgements
// lost) sends only to its successor, and its own candidacy is swallowed by
// larger ones, so the predecessor would skip it in every later round and
// the election never reach it (ring-chaos found such a run). A server
// really down is marked again at the cost of one refused or
// unacknowledged send per round.
func (l *liveness) forgetDown() {
	clear(l.down)
	l.downAt = l.downAt[:0]
}

// successor returns the next live member clockwise, or self when alone.
func (l *liveness) successor() UID { return l.neighbour(1) }

// predecessor returns the previous live member, or self when alone.
func (l *liveness) predecessor() UID { return l.neighbour(-1) }

func (l *liveness) neighbour(step int) UID {
	size := l.ring.Len()
	i := l.pos
	for range size - 1 {
		i += step
		switch {
		case i >= size:
			i -= size
		case i < 0:
			i += size
		}
		if !l.down[i] {
			return l.ring.order[i]
		}
	}
	return l.self
}
