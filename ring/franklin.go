package ring

import (
	"maps"
	"slices"
)

// Franklin is Franklin's election (1982) on a bidirectional ring. Every
// member starts active; in each phase an active member sends its UID both
// ways to the nearest active member on either side (passive members
// relay), and stays active only if it is larger than both UIDs it gets.
// No two neighbouring actives both survive, so at most ⌊k/2⌋ of k go on
// and after at most ⌊log₂ n⌋ phases one is left; its own UID then comes
// round to it and it leads. Each phase costs 2n messages: at most
// 2n⌊log₂ n⌋ + 2n election messages, within the published 2n⌊log₂ n⌋ + 3n.
// Phases are numbered, so messages that overtake one another on a
// non-FIFO link are held until their phase comes.
type Franklin struct {
	passive bool
	elected bool
	phase   uint32
	got     map[uint32]*[2]Message // by phase: the UIDs come travelling clockwise, and back
}

// NewFranklin is the registry's constructor.
func NewFranklin() Core { return &Franklin{got: map[uint32]*[2]Message{}} }

func (f *Franklin) Start(e *Env) { f.send(e) }

func (f *Franklin) send(e *Env) {
	for _, d := range []Dir{DirNext, DirPrev} {
		e.Send(Message{Cand: e.Self(), Phase: f.phase, Hops: 1, Dir: d})
	}
}

func (f *Franklin) Receive(e *Env, m Message) {
	switch {
	case f.passive:
		e.Forward(m)
	case m.Cand == e.Self():
		// The only active member left: its UID came round.
		if !f.elected {
			f.elected = true
			e.Elect()
		}
	case m.Phase >= f.phase && m.Dir <= DirPrev:
		got := f.got[m.Phase]
		if got == nil {
			got = &[2]Message{}
			f.got[m.Phase] = got
		}
		got[m.Dir] = m
		f.advance(e)
	}
}

// advance runs the phases whose two UIDs have both come.
func (f *Franklin) advance(e *Env) {
	for !f.passive {
		got := f.got[f.phase]
		if got == nil || got[0].Cand.IsZero() || got[1].Cand.IsZero() {
			return
		}
		delete(f.got, f.phase)
		if e.Self().Less(got[0].Cand) || e.Self().Less(got[1].Cand) {
			f.passive = true
			f.relayHeld(e)
			return
		}
		f.phase++
		f.send(e)
	}
}

// relayHeld passes on the later phases' UIDs a member held while it was
// active: they are for the active members beyond it. Phases go in order
// so the relay is deterministic.
func (f *Franklin) relayHeld(e *Env) {
	for _, p := range slices.Sorted(maps.Keys(f.got)) {
		for _, m := range f.got[p] {
			if !m.Cand.IsZero() {
				e.Forward(m)
			}
		}
	}
	clear(f.got)
}
