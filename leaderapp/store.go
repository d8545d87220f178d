package leaderapp

import "sync"

// Store is a replica's data. The leader numbers writes; a replica applies
// a write only when its number is newer than what it holds for the key, so
// propagations that arrive out of order leave the newest value.
type Store struct {
	mu   sync.RWMutex
	m    map[string]item
	last uint64 // the largest sequence number applied
}

type item struct {
	val []byte
	seq uint64
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{m: map[string]item{}} }

// Get returns the key's value, the sequence number of the write that
// stored it, and whether it exists.
func (s *Store) Get(key string) ([]byte, uint64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	it, ok := s.m[key]
	return it.val, it.seq, ok
}

// Apply stores val under key at seq unless the key holds a newer write,
// and reports whether it did.
func (s *Store) Apply(key string, val []byte, seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = max(s.last, seq)
	if it, ok := s.m[key]; ok && it.seq >= seq {
		return false
	}
	s.m[key] = item{val: val, seq: seq}
	return true
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
