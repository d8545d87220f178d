// Package coordinator is seed 002's coordinator (ECS) role as a
// deterministic state machine, in the style of ring.Node: it admits
// joining servers, assigns key ranges (the metadata's hash ring), numbers
// metadata versions, keeps a failure detector per member from their
// heartbeat acks, removes the dead ones, and takes the role over when its
// server wins an election. It does no I/O and reads no clock: the
// ringnode server (ring/server) and the simulator (ring/sim) feed it
// inputs with the time and carry out what it returns.
package coordinator

import (
	"fmt"
	"slices"
	"time"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/membership"
)

// Update is what an input changed. Meta, when set, is new metadata: the
// server installs it, pushes it to every other member, and starts the data
// moves it implies (its key ranges changed).
type Update struct {
	Meta *membership.Metadata
	// Removed lists the members dropped for silence, sorted.
	Removed []string
}

// Coordinator is one server's view of the coordinator role: the metadata it
// holds and, while that metadata names it coordinator, the members'
// failure detectors.
type Coordinator struct {
	self      string
	suspect   time.Duration
	meta      *membership.Metadata
	detectors map[string]*ring.Detector // nil unless active
	// next is a lower bound on the detectors' earliest deadline, made
	// exact by Tick and Install. Heard only moves a deadline later, so
	// the bound stays safe without a scan per ack — a scan per ack would
	// cost O(n) for each of n acks per heartbeat round.
	next time.Duration

	// The data guard (quorum.go): what each member reported rebalanced,
	// and the versions whose arcs a removal must leave a holder of.
	guard      bool
	rebalanced map[string]membership.Epoch
	heldMeta   *membership.Metadata   // the newest metadata all members rebalanced under
	versions   []*membership.Metadata // it and every version installed since
}

// New returns the role of server self, which is not coordinating until it
// installs metadata naming it. suspect is how long a member may stay
// silent before it is removed.
func New(self string, suspect time.Duration) (*Coordinator, error) {
	if err := membership.CheckAddr(self); err != nil {
		return nil, fmt.Errorf("coordinator: self: %w", err)
	}
	if suspect <= 0 {
		return nil, fmt.Errorf("coordinator: suspect timeout %v must be positive", suspect)
	}
	return &Coordinator{self: self, suspect: suspect}, nil
}

// Meta is the current metadata (nil before the first).
func (c *Coordinator) Meta() *membership.Metadata { return c.meta }

// Active reports whether this server coordinates.
func (c *Coordinator) Active() bool { return c.detectors != nil }

// Round is the election round of the current metadata.
func (c *Coordinator) Round() uint64 {
	if c.meta == nil {
		return 0
	}
	return c.meta.Round
}

// Install makes m current when it is newer than what the role holds, and
// reports whether it was. Metadata naming this server coordinator makes
// the role active and tracks every member; any other deactivates it.
func (c *Coordinator) Install(now time.Duration, m *membership.Metadata) bool {
	if m == nil || !m.Newer(c.meta) {
		return false
	}
	c.meta = m
	for addr := range c.rebalanced {
		if !m.Has(addr) {
			delete(c.rebalanced, addr)
		}
	}
	c.remember(m)
	if m.Coordinator != c.self {
		c.detectors = nil
		return true
	}
	if c.detectors == nil {
		c.detectors = map[string]*ring.Detector{}
	}
	for addr := range c.detectors {
		if !m.Has(addr) {
			delete(c.detectors, addr)
		}
	}
	for _, addr := range m.Servers {
		if addr != c.self && c.detectors[addr] == nil {
			c.detectors[addr] = ring.NewDetector(now, c.suspect, 0, nil)
		}
	}
	c.next = c.earliest()
	return true
}

func (c *Coordinator) earliest() time.Duration {
	first := time.Duration(1<<63 - 1)
	for _, d := range c.detectors {
		first = min(first, d.Deadline())
	}
	return first
}

// Bootstrap starts a ring of one: this server, coordinating round 1 with
// replicas copies of each key.
func (c *Coordinator) Bootstrap(now time.Duration, replicas int) (Update, error) {
	m, err := membership.New(1, 1, c.self, replicas, []string{c.self})
	if err != nil {
		return Update{}, err
	}
	c.Install(now, m)
	return Update{Meta: m}, nil
}

// Join handles a server's request to join. While coordinating it admits
// addr and returns the metadata to answer with (Update.Meta is set only
// when the membership changed); otherwise it returns the coordinator to
// redirect to ("" when unknown).
func (c *Coordinator) Join(now time.Duration, addr string) (answer *membership.Metadata, redirect string, up Update, err error) {
	if err := membership.CheckAddr(addr); err != nil {
		return nil, "", Update{}, fmt.Errorf("join: addr: %w", err)
	}
	if !c.Active() {
		if c.meta != nil {
			redirect = c.meta.Coordinator
		}
		return nil, redirect, Update{}, nil
	}
	nm, err := c.meta.With(addr)
	if err != nil {
		return nil, "", Update{}, fmt.Errorf("join %s: %w", addr, err)
	}
	if nm != c.meta {
		c.Install(now, nm)
		up.Meta = nm
	}
	if d := c.detectors[addr]; d != nil {
		d.Heard(now) // a restarted server gets a fresh chance
	}
	return nm, "", up, nil
}

// Heard records a heartbeat ack from member addr.
func (c *Coordinator) Heard(now time.Duration, addr string) {
	if d := c.detectors[addr]; d != nil {
		d.Heard(now)
	}
}

// Tick removes the members whose acks stopped.
func (c *Coordinator) Tick(now time.Duration) (Update, error) {
	var dead []string
	for addr, d := range c.detectors {
		if d.Suspect(now) {
			dead = append(dead, addr)
		}
	}
	if len(dead) == 0 {
		c.next = c.earliest()
		return Update{}, nil
	}
	slices.Sort(dead)
	if dead = c.removable(now, dead); len(dead) == 0 {
		// Silent members that may not leave yet stay suspect: look again
		// a quarter of the suspect timeout on (acks and rebalance reports
		// may have made them removable), not at once and for ever.
		c.next = max(c.earliest(), now+c.suspect/4)
		return Update{}, nil
	}
	nm, err := c.meta.Without(dead...)
	if err != nil {
		return Update{}, fmt.Errorf("remove %v: %w", dead, err)
	}
	c.Install(now, nm)
	return Update{Meta: nm, Removed: dead}, nil
}

// Won makes this server coordinator after it won the election of round:
// the old coordinator leaves the metadata, versions restart at 1 in the
// new round. A round the role already coordinates changes nothing.
func (c *Coordinator) Won(now time.Duration, round uint64) (Update, error) {
	if c.meta == nil {
		return Update{}, fmt.Errorf("won round %d: no metadata to take over", round)
	}
	if c.Active() && c.meta.Round >= round {
		return Update{}, nil
	}
	old := c.meta
	// The old coordinator leaves unless it must stay (removable): then it
	// stays a member, silent, until it answers or may leave.
	leaves := old.Coordinator != c.self && len(c.removable(now, []string{old.Coordinator})) == 1
	nm, err := old.TakeOver(c.self, round, leaves)
	if err != nil {
		return Update{}, fmt.Errorf("take over round %d: %w", round, err)
	}
	if !c.Install(now, nm) {
		return Update{}, fmt.Errorf("take over round %d: metadata of round %d is newer", round, old.Round)
	}
	return Update{Meta: nm, Removed: removed(old, nm)}, nil
}

// Adopt makes m current whatever the role held: m is the answer to this
// server's own join, after the ring it was in lost it or it left that
// ring for a larger one (Yields). Rounds of different rings do not
// compare, so Install's order does not apply.
func (c *Coordinator) Adopt(now time.Duration, m *membership.Metadata) {
	c.meta, c.detectors, c.heldMeta, c.versions = nil, nil, nil, nil
	clear(c.rebalanced)
	c.Install(now, m)
}

// Yields reports whether a server holding cur should leave its ring for
// found, the metadata of a ring it does not belong to, met after a
// partition healed. Both sides can have elected and removed each other;
// the ring with more servers absorbs the other (with R+1 > n/2 replicas
// per key only it could acknowledge writes), and between rings of one
// size the one whose coordinator has the larger UID does. The order is
// total over distinct coordinators, so two rings never yield to each
// other.
func Yields(cur, found *membership.Metadata) bool {
	switch {
	case found == nil || cur == nil:
		return found != nil
	case len(found.Servers) != len(cur.Servers):
		return len(found.Servers) > len(cur.Servers)
	}
	return ring.UIDOf(cur.Coordinator).Less(ring.UIDOf(found.Coordinator))
}

// StepDown gives the role up (another server won a newer round); the
// metadata stays until the new coordinator's arrives.
func (c *Coordinator) StepDown() { c.detectors = nil }

// Deadline is when to call Tick next: no member can be removed before it
// (Tick then may find nothing to do, and moves it on). ok is false while
// the role is inactive or tracks nobody.
func (c *Coordinator) Deadline() (at time.Duration, ok bool) {
	if len(c.detectors) == 0 {
		return 0, false
	}
	return c.next, true
}

func removed(old, nm *membership.Metadata) []string {
	var out []string
	for _, s := range old.Servers {
		if !nm.Has(s) {
			out = append(out, s)
		}
	}
	return out
}
