// Package lease decides whether a ring server may serve as the owner of
// keys: only while a strict majority of its ring's members (itself
// included) has confirmed, within the lease term, that it is still one of
// them. A server cut off with a minority stops serving within one term of
// its last confirmation, before the majority side — which removes it only
// after the coordinator's suspect timeout, longer than the term — can give
// its keys to others (docs/ringnode.md, "Partitions").
//
// The lease runs from when a round of confirmations was asked for, not
// from when the answers came back: an answer says the member counted this
// server at some moment after the ask, so that is the latest moment the
// server may rely on. It is a deterministic state machine: the server
// gives it the time (a monotonic clock) and the answers.
package lease

import (
	"fmt"
	"time"
)

// keep bounds the rounds remembered: answers to older rounds cannot
// extend the lease past a newer one's, and a peer that answers that late
// is no help anyway.
const keep = 8

// Lease is one server's view of its serving lease.
type Lease struct {
	self    string
	term    time.Duration
	members map[string]bool
	next    uint64 // the number of the next round
	rounds  [keep]round
	until   time.Duration
	valid   bool // until is meaningful
}

type round struct {
	n     uint64
	asked time.Duration
	yes   map[string]bool
	done  bool
}

// New returns the lease of server self with the given term, which must be
// positive; it holds nothing until a majority of some membership
// confirms it.
func New(self string, term time.Duration) (*Lease, error) {
	if term <= 0 {
		return nil, fmt.Errorf("lease: term %v must be positive", term)
	}
	return &Lease{self: self, term: term, next: 1}, nil
}

// Members sets the ring's members (self among them, or this server is not
// a member and can hold no lease). A lease already held runs to its end:
// it was granted by a majority of the ring as it was, and the majority
// side removes members only after longer than a term. Rounds asked under
// the old membership no longer count.
func (l *Lease) Members(servers []string) {
	l.members = make(map[string]bool, len(servers))
	for _, s := range servers {
		l.members[s] = true
	}
	l.rounds = [keep]round{}
}

// Ask starts a round of confirmations at now and returns its number, to be
// sent to every other member. A ring of one confirms itself at once.
func (l *Lease) Ask(now time.Duration) uint64 {
	n := l.next
	l.next++
	r := &l.rounds[n%keep]
	*r = round{n: n, asked: now, yes: map[string]bool{}}
	l.Confirmed(n, l.self)
	return n
}

// Confirmed records that member from counted this server in round n.
// Answers from non-members, to unknown or forgotten rounds, are ignored.
func (l *Lease) Confirmed(n uint64, from string) {
	r := &l.rounds[n%keep]
	if r.n != n || r.yes == nil || r.done || !l.members[from] || !l.members[l.self] {
		return
	}
	r.yes[from] = true
	if 2*len(r.yes) <= len(l.members) {
		return
	}
	r.done = true
	if end := r.asked + l.term; !l.valid || end > l.until {
		l.until, l.valid = end, true
	}
}

// Valid reports whether the server may serve at now.
func (l *Lease) Valid(now time.Duration) bool { return l.valid && now < l.until }

// Until is when the lease ends (ok false before the first grant).
func (l *Lease) Until() (at time.Duration, ok bool) { return l.until, l.valid }

// Term is the lease's length.
func (l *Lease) Term() time.Duration { return l.term }
