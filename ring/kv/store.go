// Package kv is a server's durable key-value storage: an append-only log
// replayed into an in-memory index at start, with an LRU cache of values
// in front of the file. Every entry carries a version so that replication
// and data moves can be applied in any order and still converge: an
// older version never overwrites a newer one, and deletes are versioned
// tombstones.
package kv

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"
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

// size is the length of the record l points at.
func (l loc) size(key string) int64 { return int64(headerLen+len(key)) + int64(l.vlen) }

// Store is safe for concurrent use.
type Store struct {
	mu      sync.RWMutex
	path    string
	log     *slog.Logger
	opts    Options
	f       *os.File
	end     int64
	garbage int64 // bytes of records a later one superseded
	index   map[string]loc
	cache   *valueCache
	buf     []byte
	dirty   bool // written since the last fsync (interval policy)
	renamed bool // a compaction renamed the log and its folder is not yet fsynced
	// compactRetry is the garbage at which a failed compaction is tried
	// again (0: the threshold).
	compactRetry int64
	fsync        func(*os.File) error // (*os.File).Sync; tests fail or count the calls
	syncDir      func(dir string) error
	stop         chan struct{}
	done         chan struct{}
}

// Fsync policies: when a write reaches the disk itself, not just the
// operating system. Every policy survives a process crash; only always
// survives a power cut without losing an acknowledged write.
const (
	FsyncNever    = "never"    // the OS flushes when it likes
	FsyncInterval = "interval" // a background fsync every FsyncEvery
	FsyncAlways   = "always"   // before every write returns
)

// FsyncPolicies lists the policies, for flag validation.
var FsyncPolicies = []string{FsyncNever, FsyncInterval, FsyncAlways}

// Options tune a store.
type Options struct {
	CacheBytes int64  // memory for recently used values, keys included (0: no cache)
	Fsync      string // FsyncNever (default), FsyncInterval or FsyncAlways
	FsyncEvery time.Duration
	// CompactAt is the garbage (superseded records) in bytes past which
	// the log is rewritten with only the live records, once garbage is
	// also half the file. Default 64 MiB; negative disables compaction.
	CompactAt int64
}

// Open opens or creates the log at path and replays it. It always opens
// a log it can read a prefix of: whatever follows the last valid record —
// a record torn by a crash at any byte, a zero-filled or garbage tail, the
// rest of a failed write — is cut off, saved beside the log in
// path.cut-OFFSET and logged, and the store continues from the valid
// prefix.
func Open(path string, o Options, log *slog.Logger) (*Store, error) {
	switch o.Fsync {
	case "":
		o.Fsync = FsyncNever
	case FsyncNever, FsyncInterval, FsyncAlways:
	default:
		return nil, fmt.Errorf("open store: fsync policy %q: want never, interval or always", o.Fsync)
	}
	if o.FsyncEvery <= 0 {
		o.FsyncEvery = 100 * time.Millisecond
	}
	if o.CompactAt == 0 {
		o.CompactAt = 64 << 20
	}
	// A compaction a crash interrupted left its half-written file: the
	// log it was to replace is whole.
	if err := os.Remove(path + ".compact"); err == nil {
		log.Warn("removed an interrupted compaction's file", "file", path+".compact")
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open store: remove an interrupted compaction: %w", err)
	}
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{path: path, log: log, opts: o, f: f, index: map[string]loc{}, fsync: (*os.File).Sync, syncDir: syncDir}
	// A new log's name is made durable with the first write the policy
	// makes durable.
	s.renamed = errors.Is(statErr, fs.ErrNotExist) && o.Fsync != FsyncNever
	if o.CacheBytes > 0 {
		s.cache = newValueCache(o.CacheBytes)
	}
	if err := s.replay(); err != nil {
		f.Close()
		return nil, fmt.Errorf("replay %s: %w", path, err)
	}
	if o.Fsync == FsyncInterval {
		s.stop, s.done = make(chan struct{}), make(chan struct{})
		go s.syncLoop()
	}
	return s, nil
}

// Get returns the entry for key; ok is false when the key was never
// stored (a tombstone is returned with Deleted set).
func (s *Store) Get(key string) (e Entry, ok bool, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock() // compaction swaps the file under the write lock
	l, ok := s.index[key]
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
	cur, had := s.index[key]
	if had && cur.version >= e.Version {
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
	if had {
		s.garbage += cur.size(key)
	}
	s.index[key] = loc{off: off, vlen: uint32(len(e.Value)), version: e.Version, deleted: e.Deleted}
	if s.cache != nil {
		if e.Deleted {
			s.cache.Remove(key)
		} else {
			s.cache.Add(key, e.Value)
		}
	}
	s.maybeCompact()
	return true, nil
}

// Forget drops key from this server (it is no longer responsible for it).
func (s *Store) Forget(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.index[key]
	if !ok {
		return nil
	}
	if _, err := s.append(flagForget, 0, key, nil); err != nil {
		return err
	}
	// Both the forgotten record and the forget record itself are garbage:
	// a compacted log simply lacks the key.
	s.garbage += cur.size(key) + int64(headerLen+len(key))
	delete(s.index, key)
	if s.cache != nil {
		s.cache.Remove(key)
	}
	s.maybeCompact()
	return nil
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

// Close flushes (under the interval policy) and closes the log.
func (s *Store) Close() error {
	if s.stop != nil {
		close(s.stop)
		<-s.done
		s.stop = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return errors.New("store already closed")
	}
	var err error
	if s.dirty || s.renamed {
		err = s.sync()
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	s.f = nil
	return err
}
