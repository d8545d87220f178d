package ring

// Core is an election algorithm's own logic at one member for one round:
// all a researcher writes to add an algorithm (docs/election-algorithms.md).
// The Machine driving it owns what every algorithm shares — rounds and
// their restart, waking a member at the first message of a round, the
// winner's announcement, the coordinator's heartbeats and the failure
// detector, per-hop acknowledgement and retransmission, and skipping the
// members found down — so a Core sees only the election messages of its
// own round. A Core is made afresh for every round a member takes part in.
type Core interface {
	// Start begins this member's part in the round: it initiated the
	// election, or the round's first message woke it (Receive follows).
	Start(e *Env)
	// Receive handles an ELECTION message of the current round.
	Receive(e *Env, m Message)
}

// Rerouter is implemented by a Core that handles an undeliverable ELECTION
// itself. Without it, a message along the ring goes on to the next live
// member in its direction, and a direct message is dropped.
type Rerouter interface {
	Undeliverable(e *Env, m Message)
}

// Env is what a Core may see and do.
type Env struct{ m *Machine }

// Self is this member's UID.
func (e *Env) Self() UID { return e.m.self }

// Size is the number of members in the ring metadata, down ones included.
func (e *Env) Size() int { return e.m.ring.Len() }

// Members lists the members in ring order (do not modify).
func (e *Env) Members() []UID { return e.m.ring.order }

// IsDown reports whether this member has found u down.
func (e *Env) IsDown(u UID) bool { return e.m.IsDown(u) }

// Send sends an ELECTION message: the Core sets Kind, Cand, Phase, Hops
// and Dir, and To for DirDirect; DirNext and DirPrev go to the nearest
// live member that way. A message to this member itself (it is alone in
// that direction) is received once the current call returns.
func (e *Env) Send(m Message) { e.m.sendElection(m) }

// Forward passes m on in its direction one hop further. A message that has
// already made Size hops is dropped: its sender is gone, or it would
// circle forever.
func (e *Env) Forward(m Message) {
	if m.Hops >= uint32(e.Size()) {
		return
	}
	m.Hops++
	e.m.sendElection(m)
}

// Elect makes this member the leader: the Machine announces it.
func (e *Env) Elect() { e.m.announce(e.m.self) }

// Announce makes leader, another member, the leader (Dolev–Klawe–Rodeh
// finds the maximum away from its owner).
func (e *Env) Announce(leader UID) { e.m.announce(leader) }
