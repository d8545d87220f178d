package coordinator

import (
	"slices"
	"time"

	"github.com/ringside/ringside/ring/membership"
)

// Ownership changes need a majority. Two rules keep one side of a
// partition from serving keys the other side serves too, at any ring size
// (docs/ringnode.md, "Partitions"):
//
//   - A coordinator removes silent members only while it has heard, within
//     half the suspect timeout, from a strict majority of its metadata
//     (itself included). Members that are merely not suspected yet do not
//     count: cut off with a minority, a coordinator would otherwise remove
//     the other side a few at a time, as each detector fired, until its
//     side were a majority of what was left. A minority side cannot shrink
//     its ring, so it never holds the serving lease (ring/lease), which
//     needs a majority of the ring. Taking over after an election removes
//     one member (the old coordinator); a minority that removes one of the
//     other side's members that way is still a minority of what is left.
//   - With the data guard on (servers that store keys), a removal never
//     takes away every server that may hold an arc's data. A server
//     forgets a key only once every server responsible for it under its
//     own newest metadata has it (ring/server's rebalancer), so each key
//     is held whole by its responsible servers under at least one
//     metadata version since the newest one every member reported
//     rebalanced under (Rebalanced). A removal must leave a server of
//     every arc of every one of those versions. A key whose holders are
//     all cut off stays unavailable rather than being served without its
//     acknowledged writes.

// maxVersions bounds the versions the guard remembers. A ring that
// changes this often without ever rebalancing whole has bigger trouble;
// past it the oldest are dropped.
const maxVersions = 256

// Guard turns the data guard on: removals keep one holder of every arc.
func (c *Coordinator) Guard() {
	c.guard = true
	if c.rebalanced == nil {
		c.rebalanced = map[string]membership.Epoch{}
	}
}

// Rebalanced records that member addr finished moving data for the
// metadata of epoch e (and the coordinator's own server reports itself).
// Reports come whether or not this server coordinates, so a server that
// takes over knows where the data is.
func (c *Coordinator) Rebalanced(addr string, e membership.Epoch) {
	if !c.guard || c.meta == nil || !c.meta.Has(addr) {
		return
	}
	c.rebalanced[addr] = e
	c.advanceHeld()
}

// Held is the newest metadata every member has reported rebalanced under
// (nil before any, or without the guard).
func (c *Coordinator) Held() *membership.Metadata { return c.heldMeta }

// remember adds m, just installed, to the versions the guard judges by.
func (c *Coordinator) remember(m *membership.Metadata) {
	if !c.guard {
		return
	}
	if len(c.versions) == maxVersions {
		c.versions = slices.Delete(c.versions, 0, 1)
	}
	c.versions = append(c.versions, m)
	c.advanceHeld()
}

// advanceHeld forgets every version before the current metadata once every
// member has reported it rebalanced under it.
func (c *Coordinator) advanceHeld() {
	if c.meta == nil || c.heldMeta == c.meta {
		return
	}
	e := c.meta.Epoch()
	for _, s := range c.meta.Servers {
		if c.rebalanced[s] != e {
			return
		}
	}
	c.heldMeta = c.meta
	c.versions = append(c.versions[:0], c.meta)
}

// removable is the part of dead (members of the current metadata) that may
// leave it at now: nothing unless a strict majority is heard from (quorate)
// and stays, and with the guard, no server whose leaving would take the
// last possible holder of an arc away.
func (c *Coordinator) removable(now time.Duration, dead []string) []string {
	if !c.quorate(now) {
		return nil
	}
	out := slices.Clone(dead)
	if c.guard {
		stays := func(s string) bool { return c.meta.Has(s) && !slices.Contains(out, s) }
		for _, v := range c.versions {
			for i := range v.Servers {
				if holders := v.ResponsibleAt(i); !slices.ContainsFunc(holders, stays) {
					out = slices.DeleteFunc(out, func(s string) bool { return slices.Contains(holders, s) })
				}
			}
		}
	}
	if 2*(len(c.meta.Servers)-len(out)) <= len(c.meta.Servers) {
		return nil
	}
	return out
}

// quorate reports whether this server and the members it heard from within
// half the suspect timeout are a strict majority of the metadata. Before
// its detectors exist (not coordinating) it counts the members it would
// start them for, as heard now: a takeover removes one member only.
func (c *Coordinator) quorate(now time.Duration) bool {
	if c.detectors == nil {
		return true
	}
	heard := 0
	for _, s := range c.meta.Servers {
		d := c.detectors[s]
		if s == c.self || d != nil && d.Silence(now) <= c.suspect/2 {
			heard++
		}
	}
	return 2*heard > len(c.meta.Servers)
}
