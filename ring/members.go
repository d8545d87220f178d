package ring

import "fmt"

// Ring is an immutable ring order shared by every node that uses it: the
// successor of Order()[i] is Order()[i+1], wrapping. Sharing it keeps a
// simulated 1,024-node ring from building 1,024 copies of the same index.
type Ring struct {
	order []UID
	index map[UID]int
}

// NewRing builds a ring from uids in message order; SortedRing gives the
// consistent-hash order. Duplicates are rejected.
func NewRing(order []UID) (*Ring, error) {
	index := make(map[UID]int, len(order))
	for i, u := range order {
		if _, dup := index[u]; dup {
			return nil, fmt.Errorf("ring: uid %s appears twice", u.Short())
		}
		index[u] = i
	}
	return &Ring{order: order, index: index}, nil
}

// Len is the number of members.
func (r *Ring) Len() int { return len(r.order) }

// Order returns the members in message order (do not modify).
func (r *Ring) Order() []UID { return r.order }

// Index returns the position of u, or -1 (always, in a nil ring: the
// zero Metadata's, which has no members).
func (r *Ring) Index(u UID) int {
	if r == nil {
		return -1
	}
	if i, ok := r.index[u]; ok {
		return i
	}
	return -1
}
