package ring

import "time"

// hopAcks is per-hop acknowledgement (Config.AckTimeout): the hops a
// member sent and awaits acknowledgements for, and the hops it handled
// lately, so that a retransmission whose first copy arrived is only
// acknowledged again.
type hopAcks struct {
	timeout time.Duration
	retries int
	pend    []pendingHop // sent, not yet acknowledged
	seen    [32]Message  // hops handled lately
	next    int          // where the next handled hop goes in seen
}

// pendingHop is a sent ELECTION or ELECTED awaiting its acknowledgement.
type pendingHop struct {
	m    Message
	due  time.Duration
	left int // retransmissions left
}

// covers reports whether m is a hop that is acknowledged.
func (h *hopAcks) covers(m Message) bool { return h.timeout > 0 && acked(m.Type) }

// track records a sent hop until it is acknowledged.
func (h *hopAcks) track(now time.Duration, m Message) {
	if h.covers(m) {
		h.pend = append(h.pend, pendingHop{m: m, due: now + h.timeout, left: h.retries})
	}
}

// ack is the acknowledgement self sends for m.
func ack(self UID, m Message) Message {
	a := m
	a.Ack, a.Resent, a.From, a.To = true, false, self, m.From
	return a
}

// reset forgets the pending hops: a new round made them moot.
func (h *hopAcks) reset() { h.pend = h.pend[:0] }

// drop forgets the pending hop of m to to, if any.
func (h *hopAcks) drop(to UID, m Message) {
	for i, p := range h.pend {
		if p.m.To == to && sameHop(p.m, m) {
			h.pend = append(h.pend[:i], h.pend[i+1:]...)
			return
		}
	}
}

// duplicate reports whether m is a hop handled lately (a retransmission
// whose first copy arrived, its acknowledgement lost), and records it
// otherwise.
func (h *hopAcks) duplicate(m Message) bool {
	for _, s := range h.seen {
		if s.From == m.From && sameHop(s, m) {
			return true
		}
	}
	h.seen[h.next] = m
	h.next = (h.next + 1) % len(h.seen)
	return false
}

// retransmit appends to out every pending hop whose acknowledgement is
// overdue, marked Resent, and returns the hops out of retries: their
// targets are to be treated as unreachable.
func (h *hopAcks) retransmit(now time.Duration, out []Message) (_ []Message, resent int, gaveUp []Message) {
	keep := h.pend[:0]
	for _, p := range h.pend {
		switch {
		case now < p.due:
			keep = append(keep, p)
		case p.left > 0:
			resent++
			p.left--
			p.due = now + h.timeout
			keep = append(keep, p)
			m := p.m
			m.Resent = true
			out = append(out, m)
		default:
			gaveUp = append(gaveUp, p.m)
		}
	}
	h.pend = keep
	return out, resent, gaveUp
}

// deadline is the earliest retransmission due.
func (h *hopAcks) deadline() (at time.Duration, ok bool) {
	for _, p := range h.pend {
		if !ok || p.due < at {
			at, ok = p.due, true
		}
	}
	return at, ok
}
