package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata holds the traces of four ringnode servers over one failover of
// a ring of five (tools/hop-trace.sh 5, the killed coordinator untraced).
func fixture(t *testing.T) []episode {
	paths, err := filepath.Glob("testdata/*.trace.gz")
	require.NoError(t, err)
	require.Len(t, paths, 4)
	var all []episode
	for _, p := range paths {
		f, err := os.Open(p)
		require.NoError(t, err)
		zr, err := gzip.NewReader(f)
		require.NoError(t, err)
		eps, err := episodes(zr, p)
		f.Close()
		require.NoError(t, err, p)
		all = append(all, eps...)
	}
	return all
}

func TestEpisodesAreWakeRunWrite(t *testing.T) {
	eps := fixture(t)
	require.NotEmpty(t, eps)
	for _, e := range eps {
		// In order on one clock: woken, running, the write's start and end.
		assert.True(t, e.woken <= e.ran && e.ran <= e.w0 && e.w0 <= e.w1, "%+v", e)
		assert.True(t, e.parked == 0 || e.w1 <= e.parked, "%+v", e)
		// The wall clock of the failover (2026-12-02), not trace ticks.
		assert.Greater(t, e.woken, int64(1_796_000_000_000_000_000), "%+v", e)
	}
}

func TestChainPairsAForwardWithTheWakeItCaused(t *testing.T) {
	hops := chain(fixture(t))
	// The election's two rounds over four survivors, and the heartbeats'
	// acknowledgements before the kill.
	require.GreaterOrEqual(t, len(hops), 8)
	for _, h := range hops {
		assert.NotEqual(t, h.prev.proc, h.cur.proc)
		assert.LessOrEqual(t, h.prev.w1, h.cur.woken)
		assert.Less(t, h.cur.woken-h.prev.w1, int64(maxWake))
	}
	// The latest forward before a wake-up is the one paired with it.
	a := episode{proc: "a", woken: 0, ran: 1, w0: 2, w1: 4}
	b := episode{proc: "b", woken: 5, ran: 6, w0: 7, w1: 20}
	c := episode{proc: "c", woken: 25, ran: 26, w0: 27, w1: 30}
	got := chain([]episode{c, a, b})
	require.Len(t, got, 2)
	assert.Equal(t, hop{prev: a, cur: b}, got[0])
	assert.Equal(t, hop{prev: b, cur: c}, got[1])
}

func TestReportNamesTheMedians(t *testing.T) {
	var out bytes.Buffer
	report(&out, []hop{
		{prev: episode{w1: 0, parked: 4000}, cur: episode{woken: 30000, ran: 31000, w0: 40000, w1: 45000}},
		{prev: episode{w1: 0}, cur: episode{woken: 50000, ran: 50000, w0: 60000, w1: 61000}},
	})
	assert.Contains(t, out.String(), "hops: 2; medians µs: wake 50.0 sched 1.0 work 10.0 write 5.0 tail 4.0")
}

func TestRefusesATraceWithoutAClock(t *testing.T) {
	_, err := episodes(bytes.NewReader([]byte("go 1.26 trace\x00\x00\x00")), "x")
	assert.Error(t, err)
	_, err = episodes(bytes.NewReader(nil), "x")
	assert.Error(t, err)
}

// FuzzEpisodes feeds the reader truncated and altered traces: it answers
// an error or episodes in order on one clock, never a panic.
func FuzzEpisodes(f *testing.F) {
	raw, err := os.ReadFile("testdata/t17101.trace.gz")
	require.NoError(f, err)
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	require.NoError(f, err)
	var whole bytes.Buffer
	_, err = whole.ReadFrom(zr)
	require.NoError(f, err)
	// Prefixes of a real trace (the whole one, 600 KB, is read by the
	// tests above): small seeds mutate and execute faster.
	f.Add(whole.Bytes()[:16<<10])
	f.Add(whole.Bytes()[:64<<10])
	f.Add([]byte("go 1.26 trace\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		eps, err := episodes(bytes.NewReader(b), "fuzz")
		if err != nil {
			return
		}
		for _, e := range eps {
			if !(e.woken <= e.ran && e.ran <= e.w0 && e.w0 <= e.w1) {
				t.Fatalf("episode out of order: %+v", e)
			}
		}
	})
}
