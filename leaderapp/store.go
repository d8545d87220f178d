package leaderapp

import (
	"fmt"
	"sync"
)

// Store is a replica's data. The leader numbers writes (Version); a
// replica applies a write only when its version is newer than what it
// holds for the key, so propagations that arrive out of order leave the
// newest value.
type Store struct {
	mu    sync.RWMutex
	m     map[string]item
	last  uint64 // the largest sequence number applied, of any term
	bytes int64  // keys and values held
	max   int64  // budget for bytes (0: none)
}

// FullError is a write the store's byte budget has no room for: clients
// get 507 Insufficient Storage, and the store keeps what it held.
type FullError struct {
	Need, Held, Max int64
}

func (e *FullError) Error() string {
	return fmt.Sprintf("store full: %d bytes more would exceed its %d (it holds %d)", e.Need, e.Max, e.Held)
}

type item struct {
	val []byte
	ver Version
}

// NewStore returns an empty store holding at most maxBytes of keys and
// values (0: no bound).
func NewStore(maxBytes int64) *Store { return &Store{m: map[string]item{}, max: maxBytes} }

// Get returns the key's value, the version of the write that stored it,
// and whether it exists.
func (s *Store) Get(key string) ([]byte, Version, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	it, ok := s.m[key]
	return it.val, it.ver, ok
}

// Apply stores val under key at version v unless the key holds a write as
// new or newer, and reports whether it did; a write over the byte budget
// is refused with a *FullError and changes nothing.
func (s *Store) Apply(key string, val []byte, v Version) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, had := s.m[key]
	if had && !it.ver.Less(v) {
		s.last = max(s.last, v.Seq)
		return false, nil
	}
	grow := int64(len(val))
	if had {
		grow -= int64(len(it.val))
	} else {
		grow += int64(len(key))
	}
	if s.max > 0 && grow > 0 && s.bytes+grow > s.max {
		return false, &FullError{Need: grow, Held: s.bytes, Max: s.max}
	}
	s.last = max(s.last, v.Seq)
	s.bytes += grow
	s.m[key] = item{val: val, ver: v}
	return true, nil
}

// Next reserves the next sequence number: one past every number this
// replica has seen, so a new leader continues after its predecessor.
func (s *Store) Next() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last++
	return s.last
}

// Len is the number of keys.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}
