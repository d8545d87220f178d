package kv

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errDisk = errors.New("injected: input/output error")

// A write whose fsync failed was answered with an error: it must not come
// back after a restart, and the next write starts where it did.
func TestAFailedFsyncCutsTheRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	s, err := Open(path, Options{Fsync: FsyncAlways}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	_, err = s.Apply("kept", Entry{Value: []byte("one"), Version: 1})
	require.NoError(t, err)
	before, _ := os.Stat(path)
	s.fsync = func(*os.File) error { return errDisk }
	_, err = s.Apply("failed", Entry{Value: []byte(strings.Repeat("x", 100)), Version: 1})
	require.ErrorIs(t, err, errDisk)
	after, _ := os.Stat(path)
	assert.Equal(t, before.Size(), after.Size(), "the record is cut off before the error is answered")
	_, ok, _ := s.Get("failed")
	assert.False(t, ok)

	s.fsync = (*os.File).Sync
	_, err = s.Apply("next", Entry{Value: []byte("two"), Version: 1})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s = open(t, path, 0)
	defer s.Close()
	assert.ElementsMatch(t, []string{"kept", "next"}, s.Keys())
	entries, _ := os.ReadDir(filepath.Dir(path))
	assert.Len(t, entries, 1, "nothing was cut at replay: the log was whole")
}

// Every cut tail is kept: a second cut at the same offset (a crash at the
// same point twice) gets a file of its own.
func TestCutTailsAreNeverOverwritten(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log")
	s := open(t, path, 0)
	s.Apply("a", Entry{Value: []byte("one"), Version: 1})
	require.NoError(t, s.Close())
	good, _ := os.ReadFile(path)
	for _, tail := range []string{"first garbage", "second garbage"} {
		require.NoError(t, os.WriteFile(path, append(append([]byte{}, good...), tail...), 0o644))
		s = open(t, path, 0)
		require.NoError(t, s.Close())
	}
	off := fmt.Sprint(len(good))
	first, err := os.ReadFile(path + ".cut-" + off)
	require.NoError(t, err)
	second, err := os.ReadFile(path + ".cut-" + off + ".1")
	require.NoError(t, err)
	assert.Equal(t, "first garbage", string(first))
	assert.Equal(t, "second garbage", string(second))
}

// A compaction a crash interrupted leaves its file; the next open removes
// it and keeps the log it was to replace.
func TestAnInterruptedCompactionIsRemovedAtOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	s := open(t, path, 0)
	s.Apply("a", Entry{Value: []byte("one"), Version: 1})
	require.NoError(t, s.Close())
	require.NoError(t, os.WriteFile(path+".compact", []byte("half a compaction"), 0o644))
	s = open(t, path, 0)
	defer s.Close()
	assert.NoFileExists(t, path+".compact")
	e, ok, err := s.Get("a")
	require.NoError(t, err)
	assert.True(t, ok && string(e.Value) == "one")
}

// On a full disk compaction fails; it is tried again once the garbage has
// grown by half, not at every write — and every write still lands.
func TestAFailingCompactionIsNotRetriedAtEveryWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	s, err := Open(path, Options{CompactAt: 16 << 10}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer s.Close()
	var attempts atomic.Int32
	s.fsync = func(f *os.File) error {
		if strings.HasSuffix(f.Name(), ".compact") {
			attempts.Add(1)
			return errors.New("injected: no space left on device")
		}
		return f.Sync()
	}
	value := []byte(strings.Repeat("v", 1000))
	const writes = 2000
	for v := uint64(1); v <= writes; v++ {
		_, err := s.Apply(fmt.Sprint("k", v%10), Entry{Value: value, Version: v})
		require.NoError(t, err)
	}
	// 2 MB of garbage past a 16 KiB threshold: growing by half each time
	// is about ln(2 MB / 16 KiB) / ln 1.5 ≈ 12 attempts, not ~2000.
	assert.Positive(t, attempts.Load())
	assert.LessOrEqual(t, attempts.Load(), int32(20))
	assert.NoFileExists(t, path+".compact")

	// With space again, the next attempt compacts.
	s.fsync = (*os.File).Sync
	for v := uint64(writes + 1); v <= 2*writes; v++ {
		_, err := s.Apply(fmt.Sprint("k", v%10), Entry{Value: value, Version: v})
		require.NoError(t, err)
	}
	st, _ := os.Stat(path)
	assert.Less(t, st.Size(), int64(1<<20))
}

// After a compaction renamed the log, a write is acknowledged only once
// the rename is durable: while the folder's fsync fails, writes fail (a
// power cut would bring back the old log without them).
func TestWritesWaitForTheCompactedLogsName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	s, err := Open(path, Options{Fsync: FsyncAlways, CompactAt: 16 << 10}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	var broken atomic.Bool
	s.syncDir = func(dir string) error {
		if broken.Load() {
			return errDisk
		}
		return syncDir(dir)
	}
	value := []byte(strings.Repeat("v", 1000))
	_, err = s.Apply("first", Entry{Value: value, Version: 1}) // the new log's name, durable
	require.NoError(t, err)
	broken.Store(true)
	var failed error
	v := uint64(0)
	for failed == nil && v < 1000 {
		v++
		_, failed = s.Apply(fmt.Sprint("k", v%10), Entry{Value: value, Version: v})
	}
	require.ErrorIs(t, failed, errDisk, "a write after the compaction while the folder cannot be fsynced")
	require.Greater(t, v, uint64(16), "writes before the compaction were acknowledged")
	assert.ErrorContains(t, failed, "directory")
	broken.Store(false)
	_, err = s.Apply("after", Entry{Value: []byte("x"), Version: 1})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s = open(t, path, 0)
	defer s.Close()
	e, ok, _ := s.Get("after")
	assert.True(t, ok && string(e.Value) == "x")
	assert.Equal(t, 12, s.Len())
}
