package ring

// LeLann is LeLann's election (1977), the simplest on a unidirectional
// ring: every member sends its UID all the way round, and every member
// forwards every UID, so each learns them all. The member whose own UID
// comes back knows the maximum among those it saw; if that is itself, it
// leads. Every one of the n UIDs makes n hops: exactly n² election
// messages for n ≥ 2, whoever initiates (the first message wakes a member, which
// sends its own UID before forwarding).
//
// It is the worked example of docs/election-algorithms.md.
type LeLann struct {
	max UID // the largest UID seen this round, own included
}

// NewLeLann is the registry's constructor: a fresh Core per round.
func NewLeLann() Core { return &LeLann{} }

// Start sends this member's UID round the ring.
func (l *LeLann) Start(e *Env) {
	l.max = e.Self()
	e.Send(Message{Cand: e.Self(), Hops: 1, Dir: DirNext})
}

// Receive keeps the largest UID and forwards every UID but its own; its
// own coming back means every other UID has passed.
func (l *LeLann) Receive(e *Env, m Message) {
	if m.Cand != e.Self() {
		if l.max.Less(m.Cand) {
			l.max = m.Cand
		}
		e.Forward(m)
		return
	}
	if l.max == e.Self() {
		e.Elect()
	}
}
