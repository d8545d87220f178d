package kv

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func open(t *testing.T, path string, cache int64) *Store {
	t.Helper()
	s, err := Open(path, Options{CacheBytes: cache}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return s
}

func TestVersionsTombstonesAndReplay(t *testing.T) {
	for _, cache := range []int64{0, 64} {
		path := filepath.Join(t.TempDir(), "log")
		s := open(t, path, cache)
		ok, err := s.Apply("a", Entry{Value: []byte("one"), Version: 5})
		require.NoError(t, err)
		assert.True(t, ok)
		ok, _ = s.Apply("a", Entry{Value: []byte("old"), Version: 4})
		assert.False(t, ok, "an older version never overwrites")
		s.Apply("b", Entry{Value: []byte("bee"), Version: 1})
		s.Apply("c", Entry{Value: []byte("sea"), Version: 1})
		s.Apply("b", Entry{Deleted: true, Version: 2})
		require.NoError(t, s.Forget("c"))
		e, ok, err := s.Get("a")
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, "one", string(e.Value))
		e, ok, _ = s.Get("b")
		assert.True(t, ok && e.Deleted)
		assert.Equal(t, 1, s.Len())
		require.NoError(t, s.Close())

		s = open(t, path, cache)
		e, _, _ = s.Get("a")
		assert.Equal(t, "one", string(e.Value))
		assert.Equal(t, uint64(5), e.Version)
		e, _, _ = s.Get("b")
		assert.True(t, e.Deleted)
		_, ok, _ = s.Get("c")
		assert.False(t, ok, "a forgotten key stays forgotten after replay")
		assert.ElementsMatch(t, []string{"a", "b"}, s.Keys())
		require.NoError(t, s.Close())
	}
}

func TestTornTailIsCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	s := open(t, path, 0)
	s.Apply("a", Entry{Value: []byte("one"), Version: 1})
	s.Apply("b", Entry{Value: []byte("two"), Version: 1})
	require.NoError(t, s.Close())
	st, _ := os.Stat(path)
	require.NoError(t, os.Truncate(path, st.Size()-2))

	s = open(t, path, 0)
	_, ok, _ := s.Get("b")
	assert.False(t, ok)
	e, _, _ := s.Get("a")
	assert.Equal(t, "one", string(e.Value))
	s.Apply("c", Entry{Value: []byte("three"), Version: 1})
	require.NoError(t, s.Close())
	s = open(t, path, 0)
	e, _, _ = s.Get("c")
	assert.Equal(t, "three", string(e.Value), "writes after the cut replay cleanly")
	s.Close()
}

// A log cut or damaged at any byte reopens with the records before the
// damage; the cut bytes are kept beside it.
func TestEveryTruncationReopensWithTheValidPrefix(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log")
	s := open(t, path, 0)
	var ends []int64 // file size after each record
	for i, k := range []string{"a", "b", "c"} {
		_, err := s.Apply(k, Entry{Value: []byte(strings.Repeat(k, i+1)), Version: 1})
		require.NoError(t, err)
		st, _ := os.Stat(path)
		ends = append(ends, st.Size())
	}
	require.NoError(t, s.Close())
	full, err := os.ReadFile(path)
	require.NoError(t, err)
	for cut := 0; cut <= len(full); cut++ {
		p := filepath.Join(dir, fmt.Sprintf("cut%d", cut))
		require.NoError(t, os.WriteFile(p, full[:cut], 0o644))
		s, err := Open(p, Options{}, slog.New(slog.DiscardHandler))
		require.NoError(t, err, "cut at %d", cut)
		want := 0
		for _, e := range ends {
			if int64(cut) >= e {
				want++
			}
		}
		assert.Len(t, s.Keys(), want, "cut at %d", cut)
		require.NoError(t, s.Close())
	}
}

func TestGarbageTailsAreCutAndKept(t *testing.T) {
	for name, tail := range map[string][]byte{
		"zeros":   make([]byte, 4096),
		"garbage": []byte("\xde\xad\xbe\xef not a record at all, and long enough to look like one ..........."),
		"huge":    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "log")
			s := open(t, path, 0)
			s.Apply("a", Entry{Value: []byte("one"), Version: 1})
			require.NoError(t, s.Close())
			good, _ := os.ReadFile(path)
			f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			f.Write(tail)
			f.Close()

			s = open(t, path, 0)
			e, ok, _ := s.Get("a")
			assert.True(t, ok)
			assert.Equal(t, "one", string(e.Value))
			st, _ := os.Stat(path)
			assert.Equal(t, int64(len(good)), st.Size(), "cut back to the last valid record")
			kept, err := os.ReadFile(fmt.Sprintf("%s.cut-%d", path, len(good)))
			require.NoError(t, err, "the cut bytes are kept beside the log")
			assert.Equal(t, tail, kept)
			s.Apply("b", Entry{Value: []byte("two"), Version: 1})
			require.NoError(t, s.Close())
			s = open(t, path, 0)
			assert.ElementsMatch(t, []string{"a", "b"}, s.Keys(), "writes after the cut replay cleanly")
			s.Close()
		})
	}
}

// A failed long write followed by a shorter successful one (a disk that
// filled up, then freed) leaves the rest of the long record after the
// short one; replay keeps the short one and cuts the rest.
func TestRemainsOfAFailedWriteAreCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	s := open(t, path, 0)
	s.Apply("a", Entry{Value: []byte("one"), Version: 1})
	require.NoError(t, s.Close())
	good, _ := os.ReadFile(path)
	long := recordBytes("long", strings.Repeat("x", 100), 1)
	short := recordBytes("b", "two", 1)
	torn := append(append([]byte{}, good...), long[:60]...) // the failed write
	copy(torn[len(good):], short)                           // the next write, at the same offset
	require.NoError(t, os.WriteFile(path, torn, 0o644))
	s = open(t, path, 0)
	defer s.Close()
	assert.ElementsMatch(t, []string{"a", "b"}, s.Keys())
	e, _, _ := s.Get("b")
	assert.Equal(t, "two", string(e.Value))
}

func recordBytes(key, value string, version uint64) []byte {
	return encodeRecord(nil, 0, version, key, []byte(value))
}

// Updates to the same keys do not grow the log without bound: past the
// threshold it is rewritten with the live records, tombstones included.
func TestCompactionBoundsTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	s, err := Open(path, Options{CompactAt: 64 << 10}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	value := strings.Repeat("v", 1000)
	for v := uint64(1); v <= 2000; v++ {
		_, err := s.Apply(fmt.Sprint("k", v%10), Entry{Value: []byte(value), Version: v})
		require.NoError(t, err)
	}
	_, err = s.Apply("gone", Entry{Version: 1, Value: []byte("x")})
	require.NoError(t, err)
	_, err = s.Apply("gone", Entry{Version: 2, Deleted: true})
	require.NoError(t, err)
	st, _ := os.Stat(path)
	assert.Less(t, st.Size(), int64(3*64<<10), "2 MB of updates, 10 live keys: the log stays near the threshold")
	require.NoError(t, s.Close())

	s = open(t, path, 0)
	defer s.Close()
	for k := range 10 {
		e, ok, err := s.Get(fmt.Sprint("k", k))
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, uint64(1990+k+map[bool]int{true: 10}[k == 0]), e.Version, "k%d keeps its newest version", k)
	}
	e, ok, _ := s.Get("gone")
	assert.True(t, ok && e.Deleted && e.Version == 2, "the tombstone survives compaction")
}

func TestFsyncPolicies(t *testing.T) {
	for _, p := range FsyncPolicies {
		path := filepath.Join(t.TempDir(), "log")
		s, err := Open(path, Options{Fsync: p, FsyncEvery: time.Millisecond}, slog.New(slog.DiscardHandler))
		require.NoError(t, err, p)
		var syncs atomic.Int32
		s.mu.Lock()
		s.fsync = func(f *os.File) error { syncs.Add(1); return f.Sync() }
		s.mu.Unlock()
		_, err = s.Apply("a", Entry{Value: []byte("x"), Version: 1})
		require.NoError(t, err, p)
		switch p {
		case FsyncAlways:
			assert.EqualValues(t, 1, syncs.Load(), "fsync before the write returns")
		case FsyncInterval:
			require.Eventually(t, func() bool { return syncs.Load() >= 1 }, 10*time.Second, time.Millisecond, "the background fsync runs")
		case FsyncNever:
			assert.Zero(t, syncs.Load())
		}
		require.NoError(t, s.Close(), p)
		if p == FsyncNever {
			assert.Zero(t, syncs.Load(), "not even on close")
		}
		s = open(t, path, 0)
		assert.Equal(t, []string{"a"}, s.Keys(), p)
		s.Close()
	}
	_, err := Open(filepath.Join(t.TempDir(), "log"), Options{Fsync: "sometimes"}, slog.New(slog.DiscardHandler))
	assert.ErrorContains(t, err, `fsync policy "sometimes"`)
}

func FuzzReplayKeepsAValidPrefix(f *testing.F) {
	f.Add(recordBytes("a", "one", 1), []byte{})
	f.Add(recordBytes("a", "one", 1), make([]byte, 30))
	f.Fuzz(func(t *testing.T, prefix, tail []byte) {
		// Whatever follows, the records of a valid prefix come back.
		dir := t.TempDir()
		path := filepath.Join(dir, "log")
		s, err := Open(path, Options{}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		s.Apply("base", Entry{Value: prefix, Version: 7})
		s.Close()
		fh, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		fh.Write(tail)
		fh.Close()
		s, err = Open(path, Options{}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("a damaged tail must not stop Open: %v", err)
		}
		defer s.Close()
		e, ok, err := s.Get("base")
		if err != nil || !ok || string(e.Value) != string(prefix) || e.Version != 7 {
			t.Fatalf("the valid prefix was lost: %v %v %q", ok, err, e.Value)
		}
	})
}

func TestLimits(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "log"), 0)
	defer s.Close()
	_, err := s.Apply(string(make([]byte, MaxKeyLen+1)), Entry{Version: 1})
	assert.ErrorContains(t, err, "exceeds the limits")
}

// The value cache is bounded in bytes, not entries: values far larger
// than the budget are not kept, and what is kept never exceeds it.
func TestValueCacheIsBoundedInBytes(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "kv.log"), 1<<20)
	defer s.Close()
	big := bytes.Repeat([]byte("x"), 600<<10)
	for i := range 10 {
		key := fmt.Sprint("k", i)
		_, err := s.Apply(key, Entry{Version: 1, Value: big})
		require.NoError(t, err)
		e, ok, err := s.Get(key)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, big, e.Value)
		assert.LessOrEqual(t, s.cache.size(), int64(1<<20), "after %d values of 600 KiB", i+1)
	}
	huge := bytes.Repeat([]byte("y"), 2<<20)
	_, err := s.Apply("huge", Entry{Version: 1, Value: huge})
	require.NoError(t, err)
	_, hit := s.cache.Get("huge")
	assert.False(t, hit, "a value over the whole budget is not cached")
	e, ok, err := s.Get("huge")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, huge, e.Value, "it is read from the log")
	assert.LessOrEqual(t, s.cache.size(), int64(1<<20))
	// Replacing a value accounts for the old one leaving.
	_, err = s.Apply("k9", Entry{Version: 2, Value: []byte("small")})
	require.NoError(t, err)
	assert.LessOrEqual(t, s.cache.size(), int64(600<<10))
}
