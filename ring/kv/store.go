// Package kv is a server's durable key-value storage: an append-only log
// replayed into an in-memory index at start, with an LRU cache of values
// in front of the file. Every entry carries a version so that replication
// and data moves can be applied in any order and still converge: an
// older version never overwrites a newer one, and deletes are versioned
// tombstones.
package kv

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Limits that keep a corrupt or hostile record from allocating wildly.
const (
	MaxKeyLen   = 1 << 10
	MaxValueLen = 16 << 20
)

const (
	flagDelete = 1 << iota // a tombstone
	flagForget             // the server no longer holds the key
)

const headerLen = 4 + 1 + 8 + 4 + 4 // crc, flags, version, key length, value length

// Entry is a stored value or tombstone.
type Entry struct {
	Value   []byte
	Version uint64
	Deleted bool
}

type loc struct {
	off     int64 // of the value bytes
	vlen    uint32
	version uint64
	deleted bool
}

// Store is safe for concurrent use.
type Store struct {
	mu    sync.RWMutex
	f     *os.File
	end   int64
	index map[string]loc
	cache *lru.Cache[string, []byte]
	sync  bool
	buf   []byte
}

// Options tune a store.
type Options struct {
	CacheEntries int  // values kept in memory (0: no cache)
	Fsync        bool // fsync every write; off, a write survives a process crash but not a power cut
}

// Open opens or creates the log at path and replays it. A torn record at
// the end (a crash mid-write) is cut off; one with a bad checksum in the
// middle is an error, because later records would be misread.
func Open(path string, o Options, log *slog.Logger) (*Store, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{f: f, index: map[string]loc{}, sync: o.Fsync}
	if o.CacheEntries > 0 {
		s.cache, _ = lru.New[string, []byte](o.CacheEntries)
	}
	if err := s.replay(log); err != nil {
		f.Close()
		return nil, fmt.Errorf("replay %s: %w", path, err)
	}
	return s, nil
}

func (s *Store) replay(log *slog.Logger) error {
	st, err := s.f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, size), 1<<20)
	var off int64
	hdr := make([]byte, headerLen)
	for off < size {
		if _, err := io.ReadFull(r, hdr); err != nil {
			break // torn header
		}
		flags, version := hdr[4], binary.BigEndian.Uint64(hdr[5:])
		klen, vlen := binary.BigEndian.Uint32(hdr[13:]), binary.BigEndian.Uint32(hdr[17:])
		if klen > MaxKeyLen || vlen > MaxValueLen {
			return fmt.Errorf("record at %d: key %d / value %d bytes exceed the limits", off, klen, vlen)
		}
		body := make([]byte, int(klen)+int(vlen))
		if _, err := io.ReadFull(r, body); err != nil {
			break // torn body
		}
		crc := crc32.ChecksumIEEE(hdr[4:])
		if crc32.Update(crc, crc32.IEEETable, body) != binary.BigEndian.Uint32(hdr) {
			if off+int64(headerLen+len(body)) == size {
				break // the last record was half-written
			}
			return fmt.Errorf("record at %d: checksum mismatch", off)
		}
		key := string(body[:klen])
		switch {
		case flags&flagForget != 0:
			delete(s.index, key)
		default:
			s.index[key] = loc{off: off + headerLen + int64(klen), vlen: vlen, version: version, deleted: flags&flagDelete != 0}
		}
		off += int64(headerLen) + int64(len(body))
	}
	if off < size {
		log.Warn("cutting a torn record off the store's log", "offset", off, "size", size)
		if err := s.f.Truncate(off); err != nil {
			return err
		}
	}
	s.end = off
	return nil
}

// Get returns the entry for key; ok is false when the key was never
// stored (a tombstone is returned with Deleted set).
func (s *Store) Get(key string) (e Entry, ok bool, err error) {
	s.mu.RLock()
	l, ok := s.index[key]
	s.mu.RUnlock()
	if !ok {
		return Entry{}, false, nil
	}
	e = Entry{Version: l.version, Deleted: l.deleted}
	if l.deleted {
		return e, true, nil
	}
	if s.cache != nil {
		if v, hit := s.cache.Get(key); hit {
			e.Value = v
			return e, true, nil
		}
	}
	v := make([]byte, l.vlen)
	if _, err := s.f.ReadAt(v, l.off); err != nil {
		return Entry{}, false, fmt.Errorf("read %q: %w", key, err)
	}
	if s.cache != nil {
		s.cache.Add(key, v)
	}
	e.Value = v
	return e, true, nil
}

// Version returns the stored version of key (0 when absent).
func (s *Store) Version(key string) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.index[key].version
}

// Apply stores e under key when its version is newer than the stored one,
// and reports whether it did.
func (s *Store) Apply(key string, e Entry) (bool, error) {
	if len(key) > MaxKeyLen || len(e.Value) > MaxValueLen {
		return false, fmt.Errorf("key of %d or value of %d bytes exceeds the limits (%d, %d)", len(key), len(e.Value), MaxKeyLen, MaxValueLen)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.index[key]; ok && cur.version >= e.Version {
		return false, nil
	}
	var flags byte
	if e.Deleted {
		flags = flagDelete
		e.Value = nil
	}
	off, err := s.append(flags, e.Version, key, e.Value)
	if err != nil {
		return false, err
	}
	s.index[key] = loc{off: off, vlen: uint32(len(e.Value)), version: e.Version, deleted: e.Deleted}
	if s.cache != nil {
		if e.Deleted {
			s.cache.Remove(key)
		} else {
			s.cache.Add(key, e.Value)
		}
	}
	return true, nil
}

// Forget drops key from this server (it is no longer responsible for it).
func (s *Store) Forget(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.index[key]; !ok {
		return nil
	}
	if _, err := s.append(flagForget, 0, key, nil); err != nil {
		return err
	}
	delete(s.index, key)
	if s.cache != nil {
		s.cache.Remove(key)
	}
	return nil
}

// append writes one record and returns the offset of its value.
func (s *Store) append(flags byte, version uint64, key string, value []byte) (int64, error) {
	n := headerLen + len(key) + len(value)
	if cap(s.buf) < n {
		s.buf = make([]byte, n)
	}
	b := s.buf[:n]
	b[4] = flags
	binary.BigEndian.PutUint64(b[5:], version)
	binary.BigEndian.PutUint32(b[13:], uint32(len(key)))
	binary.BigEndian.PutUint32(b[17:], uint32(len(value)))
	copy(b[headerLen:], key)
	copy(b[headerLen+len(key):], value)
	binary.BigEndian.PutUint32(b, crc32.ChecksumIEEE(b[4:]))
	if _, err := s.f.WriteAt(b, s.end); err != nil {
		return 0, fmt.Errorf("append: %w", err)
	}
	if s.sync {
		if err := s.f.Sync(); err != nil {
			return 0, fmt.Errorf("fsync: %w", err)
		}
	}
	off := s.end + int64(headerLen+len(key))
	s.end += int64(n)
	return off, nil
}

// Keys returns every key the server holds, tombstones included (so that
// deletes move with the data).
func (s *Store) Keys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.index))
	for k := range s.index {
		out = append(out, k)
	}
	return out
}

// Len is the number of live (not deleted) keys.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, l := range s.index {
		if !l.deleted {
			n++
		}
	}
	return n
}

// Close closes the log.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return errors.New("store already closed")
	}
	err := s.f.Close()
	s.f = nil
	return err
}
