package leaderapp

import (
	"fmt"
	"sync"
)

// Fencing. A leader that stopped leading without noticing — paused past
// its lease, its clock slow, cut off from the API server — keeps applying
// writes while its successor applies others: client-go's election "does
// not guarantee that only one client is acting as a leader". With fencing
// on, every write carries its leader's term (the Lease's
// leaseTransitions, which the elector sidecar reports: bld/term.go) and
// every replica keeps the newest term it has seen, from its own sidecar
// or from a write. A write of an older term is refused with 409, and a
// leader whose term is older than one it has seen no longer acts as
// leader. Writes are ordered by (term, sequence), so a deposed leader's
// numbers never outrank its successor's.
//
// What it does not protect: a replica that has not yet seen the newer
// term accepts the old one — the write is then ordered before every write
// of the newer term at that replica, and never acknowledged (the new
// leader refuses it). Reads at a stale leader may return what its
// successor has overwritten. A Lease deleted and re-created starts its
// terms at 0 again.

// Version orders writes: by the term of the leader that numbered them,
// then by its sequence number. Without fencing every term is 0.
type Version struct {
	Term, Seq uint64
}

// Less reports whether v is older than w.
func (v Version) Less(w Version) bool {
	return v.Term < w.Term || v.Term == w.Term && v.Seq < w.Seq
}

// FencedError is a write whose term is older than one the replica has
// seen.
type FencedError struct {
	Term, Newest uint64
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("fenced: a write of term %d, older than term %d this replica has seen: its sender no longer leads", e.Term, e.Newest)
}

// Fence is the newest term a replica has seen.
type Fence struct {
	mu     sync.Mutex
	newest uint64
}

// Admit raises the fence to term, or refuses a term older than it.
func (f *Fence) Admit(term uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if term < f.newest {
		return &FencedError{Term: term, Newest: f.newest}
	}
	f.newest = term
	return nil
}

// Newest is the newest term seen.
func (f *Fence) Newest() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.newest
}
