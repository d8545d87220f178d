package freeport

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPortsAreFreeDistinctAndOutsideTheEphemeralRange(t *testing.T) {
	lo, hi := ephemeralRange()
	seen := map[int]bool{}
	for range 300 {
		p, err := Port()
		require.NoError(t, err)
		assert.False(t, seen[p], "port %d handed out twice", p)
		seen[p] = true
		assert.True(t, p < lo || p > hi, "port %d inside the ephemeral range %d–%d", p, lo, hi)
		assert.GreaterOrEqual(t, p, lowest)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		require.NoError(t, err, "port %d is free", p)
		ln.Close()
	}
	a, err := Addr()
	require.NoError(t, err)
	host, _, err := net.SplitHostPort(a)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)
}

func TestPickRange(t *testing.T) {
	for _, c := range []struct {
		lo, hi int
		want   [2]int
		none   bool
	}{
		{32768, 60999, [2]int{10000, 32767}, false}, // Linux's default
		{10500, 60999, [2]int{61000, 65535}, false}, // more room above
		{40000, 65000, [2]int{10000, 39999}, false},
		{1024, 65535, [2]int{}, true},  // nothing outside: the kernel's port
		{10200, 64800, [2]int{}, true}, // under 1000 either side
	} {
		got, none := pickRange(c.lo, c.hi)
		assert.Equal(t, c.none, none, "%d–%d", c.lo, c.hi)
		assert.Equal(t, c.want, got, "%d–%d", c.lo, c.hi)
	}
}

// A garbled ip_local_port_range is refused (ephemeralRange then falls
// back to Linux's default), never half-read.
func TestParseRangeRefusesGarbage(t *testing.T) {
	lo, hi, err := parseRange("32768\t60999\n")
	require.NoError(t, err)
	assert.Equal(t, [2]int{32768, 60999}, [2]int{lo, hi})
	for _, in := range []string{"", "32768", "a b", "1 2 3", "70000 80000", "0 100", "600 500", "-1 5"} {
		_, _, err := parseRange(in)
		assert.Error(t, err, "%q", in)
	}
}

// What parseRange accepts is a range the kernel could hold, read as the
// two numbers written: printed back the way the kernel prints it, it
// reads the same.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"32768\t60999\n", "1 65535", "0 1", "5 4", "1", "1 2 3", "-1 5", "x y", "+3 4", "100000000000000000000 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lo, hi, err := parseRange(s)
		if err != nil {
			return
		}
		if lo < 1 || hi > 65535 || lo > hi {
			t.Fatalf("%q read as %d–%d", s, lo, hi)
		}
		if lo2, hi2, err := parseRange(strconv.Itoa(lo) + "\t" + strconv.Itoa(hi) + "\n"); err != nil || lo2 != lo || hi2 != hi {
			t.Fatalf("%d–%d printed back reads %d–%d (%v)", lo, hi, lo2, hi2, err)
		}
	})
}
