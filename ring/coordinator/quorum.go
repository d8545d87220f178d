package coordinator

import (
	"slices"

	"github.com/ringside/ringside/ring/membership"
)

// Ownership changes need a majority. Two rules keep one side of a
// partition from serving keys the other side serves too, at any ring size
// (docs/ringnode.md, "Partitions"):
//
//   - A coordinator removes silent members only while the members that
//     stay are a strict majority of its metadata. A minority side cannot
//     shrink its ring until it is a majority of it, so it never holds the
//     serving lease (ring/lease), which needs a majority of the ring.
//     Taking over after an election removes one member (the old
//     coordinator); a minority that removes one of the other side's
//     members that way is still a minority of what is left.
//   - With the data guard on (servers that store keys), a removal never
//     takes away every server that holds an arc's data. Where the data is
//     comes from the members' reports (Rebalanced): the newest metadata
//     under which every member has finished its data moves is the one
//     whose responsible servers are known to hold each arc. A key whose
//     holders are all cut off stays unavailable rather than being served
//     without its acknowledged writes.

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

// Held is the newest metadata whose responsible servers are known to hold
// their arcs' data (nil before any, or without the guard).
func (c *Coordinator) Held() *membership.Metadata { return c.held }

// advanceHeld moves held to the current metadata once every member has
// reported it rebalanced under it.
func (c *Coordinator) advanceHeld() {
	if c.meta == nil || c.held == c.meta {
		return
	}
	e := c.meta.Epoch()
	for _, s := range c.meta.Servers {
		if c.rebalanced[s] != e {
			return
		}
	}
	c.held = c.meta
}

// removable is the part of dead (members of the current metadata) that may
// leave it: nothing unless the members that stay are a strict majority,
// and with the guard, no server whose leaving would take the last holder
// of an arc of the held metadata away.
func (c *Coordinator) removable(dead []string) []string {
	out := slices.Clone(dead)
	if c.guard && c.held != nil {
		stays := func(s string) bool { return c.meta.Has(s) && !slices.Contains(out, s) }
		for i := range c.held.Servers {
			holders := c.held.ResponsibleAt(i)
			if !slices.ContainsFunc(holders, stays) {
				out = slices.DeleteFunc(out, func(s string) bool { return slices.Contains(holders, s) })
			}
		}
	}
	if 2*(len(c.meta.Servers)-len(out)) <= len(c.meta.Servers) {
		return nil
	}
	return out
}
