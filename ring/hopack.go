package ring

import "time"

// hopAcks is per-hop acknowledgement (Config.AckTimeout): the hops a
// member sent and awaits acknowledgements for, and the hops it handled
// lately, so that a retransmission whose first copy arrived is only
// acknowledged again.
type hopAcks struct {
	timeout time.Duration
	retries int
	// pend holds the hops sent and not yet acknowledged, by due time;
	// pend[i] is hop number base+i, and index finds a hop's number, so an
	// acknowledgement costs O(1) however many hops a member awaits (a
	// Bully member awaits n). An acknowledged hop stays as a tombstone
	// until it reaches the front.
	pend  []pendingHop
	base  uint64
	index map[hopKey]uint64
	seen  [32]Message // hops handled lately
	// seenKey[i] is seen[i]'s hopFingerprint: duplicate compares 32 words
	// and a whole message only where one matches (LeLann at n = 1,024, `go
	// test -bench Algorithms/lelann ./ring/sim`: 1.9–2.2 s an election
	// scanning whole messages, 1.3–1.5 s this way).
	seenKey [32]uint64
	next    int // where the next handled hop goes in seen
}

// pendingHop is a sent ELECTION or ELECTED awaiting its acknowledgement.
type pendingHop struct {
	m     Message
	due   time.Duration
	left  int  // retransmissions left
	acked bool // a tombstone
}

// hopKey identifies a hop: its target and what sameHop compares.
type hopKey struct {
	to, cand UID
	round    uint64
	hops     uint32
	phase    uint32
	typ      MsgType
	kind     uint8
	dir      Dir
}

func keyOf(to UID, m Message) hopKey {
	return hopKey{to: to, cand: m.Cand, round: m.Round, hops: m.Hops, phase: m.Phase, typ: m.Type, kind: m.Kind, dir: m.Dir}
}

// covers reports whether m is a hop that is acknowledged.
func (h *hopAcks) covers(m Message) bool { return h.timeout > 0 && acked(m.Type) }

// track records a sent hop until it is acknowledged.
func (h *hopAcks) track(now time.Duration, m Message) {
	if h.covers(m) {
		h.add(pendingHop{m: m, due: now + h.timeout, left: h.retries})
	}
}

// add appends p; the same hop sent again supersedes the earlier copy, as
// one acknowledgement answers both.
func (h *hopAcks) add(p pendingHop) {
	if h.index == nil {
		h.index = map[hopKey]uint64{}
	}
	k := keyOf(p.m.To, p.m)
	if old, ok := h.index[k]; ok {
		h.pend[old-h.base].acked = true
	}
	h.index[k] = h.base + uint64(len(h.pend))
	h.pend = append(h.pend, p)
	h.trim()
}

// trim drops the tombstones at the front. The array is kept: a member
// that awaits one hop at a time (a ring algorithm's usual state) would
// otherwise allocate a new one for every hop it sends: LeLann's
// simulated election at n = 1,024 allocated 245 MB in 696,000 pieces,
// 12 MB in 16,000 with it kept (go test -bench Algorithms/lelann
// ./ring/sim).
// Live hops move to the front when they are few (cheap to copy) or
// behind at least as many tombstones, so the array is reused.
func (h *hopAcks) trim() {
	i := 0
	for i < len(h.pend) && h.pend[i].acked {
		i++
	}
	if i == 0 {
		return
	}
	h.base += uint64(i)
	switch live := len(h.pend) - i; {
	case live == 0:
		h.pend = h.pend[:0]
	case live <= 16 || i >= live:
		h.pend = h.pend[:copy(h.pend, h.pend[i:])]
	default:
		h.pend = h.pend[i:]
	}
}

// ack is the acknowledgement self sends for m.
func ack(self UID, m Message) Message {
	a := m
	a.Ack, a.Resent, a.From, a.To = true, false, self, m.From
	return a
}

// reset forgets the pending hops: a new round made them moot.
func (h *hopAcks) reset() {
	h.base += uint64(len(h.pend))
	h.pend = h.pend[:0]
	clear(h.index)
}

// drop forgets the pending hop of m to to, if any.
func (h *hopAcks) drop(to UID, m Message) {
	k := keyOf(to, m)
	i, ok := h.index[k]
	if !ok {
		return
	}
	delete(h.index, k)
	h.pend[i-h.base].acked = true
	h.trim()
}

// duplicate reports whether m is a hop handled lately (a retransmission
// whose first copy arrived, its acknowledgement lost), and records it
// otherwise.
func (h *hopAcks) duplicate(m Message) bool {
	k := hopFingerprint(m)
	for i, sk := range &h.seenKey {
		if sk == k && h.seen[i].From == m.From && sameHop(h.seen[i], m) {
			return true
		}
	}
	h.seen[h.next], h.seenKey[h.next] = m, k
	h.next = (h.next + 1) % len(h.seen)
	return false
}

// hopFingerprint mixes what duplicate compares (the sender and sameHop's
// fields) into one word: equal hops have equal fingerprints.
func hopFingerprint(m Message) uint64 {
	return m.From.Hi ^ m.From.Lo*0x9e3779b97f4a7c15 ^ m.Cand.Hi*0xbf58476d1ce4e5b9 ^ m.Cand.Lo*0x94d049bb133111eb ^
		m.Round*0xd6e8feb86659fd93 ^ (uint64(m.Hops)|uint64(m.Phase)<<32)*0xa0761d6478bd642f ^
		uint64(m.Type)<<8 ^ uint64(m.Kind)<<16 ^ uint64(m.Dir)<<24
}

// retransmit appends to out every pending hop whose acknowledgement is
// overdue, marked Resent, and returns the hops out of retries: their
// targets are to be treated as unreachable. The timeout is one for all,
// so hops fall due in the order they were tracked, and a resent hop, due
// last, goes to the end: pend stays sorted by due time.
func (h *hopAcks) retransmit(now time.Duration, out []Message) (_ []Message, resent int, gaveUp []Message) {
	k := 0
	for k < len(h.pend) && h.pend[k].due <= now {
		k++
	}
	if k == 0 {
		return out, 0, nil
	}
	overdue := append([]pendingHop(nil), h.pend[:k]...)
	h.pend = h.pend[k:]
	h.base += uint64(k)
	for _, p := range overdue {
		if p.acked {
			continue
		}
		delete(h.index, keyOf(p.m.To, p.m))
		if p.left == 0 {
			gaveUp = append(gaveUp, p.m)
			continue
		}
		resent++
		p.left--
		p.due = now + h.timeout
		h.add(p)
		m := p.m
		m.Resent = true
		out = append(out, m)
	}
	h.trim()
	return out, resent, gaveUp
}

// deadline is the earliest retransmission due.
func (h *hopAcks) deadline() (at time.Duration, ok bool) {
	if len(h.pend) == 0 {
		return 0, false
	}
	return h.pend[0].due, true
}
