package membership

import (
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/ring"
)

func servers(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "127.0.0.1:" + strconv.Itoa(7000+i)
	}
	return out
}

func TestOwnershipFollowsTheHashRing(t *testing.T) {
	_, err := New(1, 1, "127.0.0.1:0", 2, []string{"127.0.0.1:0"})
	require.ErrorContains(t, err, "bad port")
	s := servers(5)
	m, err := New(1, 1, s[3], 2, s)
	require.NoError(t, err)
	for i := 1; i < len(m.Servers); i++ {
		assert.True(t, ring.UIDOf(m.Servers[i-1]).Less(ring.UIDOf(m.Servers[i])), "sorted by UID")
	}
	for _, key := range []string{"a", "b", "hello", "k-17", ""} {
		h := KeyHash(key)
		owner := m.Owner(key)
		// The owner is the first UID ≥ hash, or the smallest when none is.
		var want string
		for _, s := range m.Servers {
			if !ring.UIDOf(s).Less(h) {
				want = s
				break
			}
		}
		if want == "" {
			want = m.Servers[0]
		}
		assert.Equal(t, want, owner, key)
		resp := m.Responsible(key)
		assert.Len(t, resp, 3)
		assert.Equal(t, owner, resp[0])
	}
	one, _ := New(1, 1, s[0], 2, s[:1])
	assert.Equal(t, []string{s[0]}, one.Responsible("x"))
}

func TestChanges(t *testing.T) {
	s := servers(4)
	m, _ := New(3, 5, s[0], 2, s[:3])
	m2, err := m.With(s[3])
	require.NoError(t, err)
	assert.Equal(t, uint64(6), m2.Version)
	assert.True(t, m2.Newer(m))
	m3, err := m2.Without(s[1])
	require.NoError(t, err)
	assert.False(t, m3.Has(s[1]))
	_, err = m3.Without(s[0])
	assert.ErrorContains(t, err, "coordinator")

	n, err := m3.TakeOver(s[2], 4, true)
	require.NoError(t, err)
	assert.Equal(t, s[2], n.Coordinator)
	assert.False(t, n.Has(s[0]))
	assert.False(t, (&Metadata{}).Has(s[0]), "the zero metadata has no members (and does not panic)")
	assert.True(t, n.Newer(m3), "a newer round wins whatever the version")
	assert.Equal(t, uint64(1), n.Version)
}

func TestDecodeNamesTheField(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{`, "unexpected end"},
		{`{"version":1,"coordinator":"a:1","servers":[]}`, "servers: empty"},
		{`{"version":0,"coordinator":"a:1","servers":["a:1"]}`, "version"},
		{`{"version":1,"coordinator":"a:1","servers":["a:1","a:1"]}`, "listed twice"},
		{`{"version":1,"coordinator":"b:1","servers":["a:1"]}`, "coordinator"},
		{`{"version":1,"coordinator":"a:1","servers":["nohost"]}`, "servers"},
		{`{"version":1,"coordinator":"a:1","replicas":-1,"servers":["a:1"]}`, "replicas"},
		{`{"version":1,"coordinator":"a:1","replicas":9223372036854775807,"servers":["a:1"]}`, "replicas: 9223372036854775807: want 0 to 65536"},
		{`{"version":18446744073709551616,"coordinator":"a:1","servers":["a:1"]}`, "version"},
	} {
		_, err := Decode([]byte(tc.in))
		require.Error(t, err, tc.in)
		assert.Contains(t, err.Error(), tc.want, tc.in)
	}
	m, err := Decode([]byte(`{"round":2,"version":1,"coordinator":"b:1","replicas":2,"servers":["b:1","a:1"]}`))
	require.NoError(t, err)
	back, err := Decode(m.Encode())
	require.NoError(t, err)
	assert.Equal(t, m.Servers, back.Servers)
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"round":2,"version":1,"coordinator":"b:1","replicas":2,"servers":["b:1","a:1"]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"round":18446744073709551615,"version":18446744073709551615,"coordinator":"a:1","replicas":9223372036854775807,"servers":["a:1"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		if r := m.Responsible("k"); len(r) == 0 || len(r) > len(m.Servers) || !m.Has(m.Coordinator) {
			t.Fatalf("valid metadata without an owner or coordinator, or more copies than servers: %v", r)
		}
		// Every server is found where the ring (UID order) puts it, and
		// nothing else is a member.
		for i, s := range m.Servers {
			if !m.Has(s) || m.Ring().Index(ring.UIDOf(s)) != i || i > 0 && m.Ring().Order()[i-1].Cmp(ring.UIDOf(s)) >= 0 {
				t.Fatalf("server %d %q: not found at its place on the ring", i, s)
			}
			if a, ok := m.AddrOf(ring.UIDOf(s)); !ok || a != s {
				t.Fatalf("server %q: AddrOf gives %q", s, a)
			}
		}
		if m.Has("z:9") != slices.Contains(m.Servers, "z:9") {
			t.Fatalf("Has and the server list disagree on z:9")
		}
		if next, err := m.With("z:9"); err == nil && next.Version <= m.Version {
			t.Fatalf("a change that does not advance the version: %d → %d", m.Version, next.Version)
		}
	})
}

func TestCheckAddr(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:7000", "node-3.ring:1", "[::1]:65535", "ringnode:8080"} {
		assert.NoError(t, CheckAddr(ok), ok)
	}
	for _, bad := range []string{"", "127.0.0.1", ":7000", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:+80",
		"127.0.0.1:x", "::1:80", "[::1:80", "[]:80", "a b:80", "a/b:80", "a\x00:80", "a?b:80", "é:80"} {
		assert.Error(t, CheckAddr(bad), "%q", bad)
	}
}

func FuzzCheckAddr(f *testing.F) {
	for _, s := range []string{"127.0.0.1:7000", "[::1]:1", "x:65535", "::", "[a]:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckAddr(s) != nil {
			return
		}
		// An accepted address names a port in range and round-trips
		// through metadata unchanged.
		m, err := New(1, 1, s, 0, []string{s})
		if err != nil {
			t.Fatalf("CheckAddr accepted %q but New refused it: %v", s, err)
		}
		d, err := Decode(m.Encode())
		if err != nil || d.Servers[0] != s || d.Owner("k") != s {
			t.Fatalf("%q does not round-trip: %v", s, err)
		}
	})
}
