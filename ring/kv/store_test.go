package kv

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func open(t *testing.T, path string, cache int) *Store {
	t.Helper()
	s, err := Open(path, Options{CacheEntries: cache}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return s
}

func TestVersionsTombstonesAndReplay(t *testing.T) {
	for _, cache := range []int{0, 2} {
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

func TestCorruptMiddleIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	s := open(t, path, 0)
	s.Apply("a", Entry{Value: []byte("one"), Version: 1})
	s.Apply("b", Entry{Value: []byte("two"), Version: 1})
	require.NoError(t, s.Close())
	b, _ := os.ReadFile(path)
	b[headerLen] ^= 0xff
	require.NoError(t, os.WriteFile(path, b, 0o644))
	_, err := Open(path, Options{}, slog.New(slog.DiscardHandler))
	assert.ErrorContains(t, err, "checksum mismatch")
}

func TestLimits(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "log"), 0)
	defer s.Close()
	_, err := s.Apply(string(make([]byte, MaxKeyLen+1)), Entry{Version: 1})
	assert.ErrorContains(t, err, "exceeds the limits")
}
