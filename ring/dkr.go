package ring

import (
	"cmp"
	"maps"
	"slices"
)

// DKR is Dolev, Klawe and Rodeh's basic election (1982; Peterson found the
// same the same year) on a unidirectional ring. Active members carry a
// value, at first their UID. In each phase an active member sends its
// value (ONE) and then the value it received (TWO) to the next active
// member; with the values v1 of its active predecessor and v2 of the one
// before, it stays active, now carrying v1, only if v1 is larger than both
// its own value and v2 — a local maximum, and no two neighbouring values
// both are —, so at most ⌊k/2⌋ of k actives go on. The last active's ONE
// comes round unchanged: that value is the maximum UID, whose member it
// announces. Phases with two or more actives cost 2n messages and there
// are at most ⌊log₂ n⌋ of them; the last costs n: at most
// 2n⌊log₂ n⌋ + n election messages, the constant this implementation is
// tested against. Phases and kinds are numbered, so messages that overtake
// one another on a non-FIFO link are held until their turn.
type DKR struct {
	passive bool
	value   UID
	v1      UID // the ONE of this phase, once sent on as TWO
	phase   uint32
	held    map[dkrKey]Message
}

type dkrKey struct {
	phase uint32
	kind  uint8
}

// Message kinds of Dolev–Klawe–Rodeh.
const (
	dkrOne uint8 = iota
	dkrTwo
)

// NewDKR is the registry's constructor.
func NewDKR() Core { return &DKR{held: map[dkrKey]Message{}} }

func (d *DKR) Start(e *Env) {
	d.value = e.Self()
	e.Send(Message{Kind: dkrOne, Cand: d.value, Phase: 0, Hops: 1, Dir: DirNext})
}

func (d *DKR) Receive(e *Env, m Message) {
	if d.passive {
		e.Forward(m)
		return
	}
	if m.Phase < d.phase || m.Kind > dkrTwo {
		return
	}
	d.held[dkrKey{m.Phase, m.Kind}] = m
	d.advance(e)
}

// advance handles the held messages whose turn has come.
func (d *DKR) advance(e *Env) {
	for !d.passive {
		if d.v1.IsZero() {
			one, ok := d.take(dkrOne)
			if !ok {
				return
			}
			if one.Cand == d.value {
				e.Announce(d.value) // the last active: its value came round
				return
			}
			d.v1 = one.Cand
			e.Send(Message{Kind: dkrTwo, Cand: d.v1, Phase: d.phase, Hops: 1, Dir: DirNext})
			continue
		}
		two, ok := d.take(dkrTwo)
		if !ok {
			return
		}
		if d.value.Less(d.v1) && two.Cand.Less(d.v1) {
			d.value, d.v1 = d.v1, UID{}
			d.phase++
			e.Send(Message{Kind: dkrOne, Cand: d.value, Phase: d.phase, Hops: 1, Dir: DirNext})
			continue
		}
		d.passive = true
		d.relayHeld(e)
	}
}

func (d *DKR) take(kind uint8) (Message, bool) {
	k := dkrKey{d.phase, kind}
	m, ok := d.held[k]
	delete(d.held, k)
	return m, ok
}

// relayHeld passes on, in phase order, what a member held for later
// phases while it was active: it is for the active members beyond it.
func (d *DKR) relayHeld(e *Env) {
	keys := slices.SortedFunc(maps.Keys(d.held), func(a, b dkrKey) int {
		return cmp.Or(cmp.Compare(a.phase, b.phase), cmp.Compare(a.kind, b.kind))
	})
	for _, k := range keys {
		e.Forward(d.held[k])
	}
	clear(d.held)
}
