package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ringside/ringside/bld"
	"github.com/ringside/ringside/bld/balance"
)

func TestParseEvent(t *testing.T) {
	e, ok := parseEvent([]byte(`{"election":"app","event":"started","id":"app-7d-x2","leader":"app-7d-x2","ts_ns":1795510865515684731}`), "ns1")
	assert.True(t, ok)
	assert.Equal(t, Event{TS: time.Unix(0, 1795510865515684731), Event: "started", ID: "ns1/app-7d-x2", Election: "ns1/app", Leader: "ns1/app-7d-x2"}, e)
	e, ok = parseEvent([]byte(`{"election":"app","event":"stopped","id":"app-7d-x2","leader":"","ts_ns":1}`), "ns1")
	assert.True(t, ok)
	assert.Empty(t, e.Leader, "a stop that handed over to nobody")
	for _, line := range []string{
		`{"addr":"[::]:4040","election":"app","event":"serving","id":"p","ts_ns":1}`, // the sidecar's address, not an event
		`I1124 09:01:05.515732       1 leaderelection.go:257] attempting to acquire leader lease`,
		`{"event":""}`, `{`, ``, `null`,
	} {
		_, ok := parseEvent([]byte(line), "ns1")
		assert.False(t, ok, line)
	}
	addr, ok := servingAt([]byte(`{"addr":"127.0.0.1:4040","event":"serving"}`))
	assert.True(t, ok)
	assert.Equal(t, "127.0.0.1:4040", addr)
}

// Whatever a Pod's log holds, a line is an event of that namespace, the
// serving announcement, or neither — never both.
func FuzzParseEvent(f *testing.F) {
	f.Add([]byte(`{"election":"app","event":"started","id":"app-1","ts_ns":5}`))
	f.Add([]byte(`{"event":"serving","addr":"x"}`))
	f.Add([]byte(`garbage`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, isEvent := parseEvent(line, "ns")
		_, isServing := servingAt(line)
		if isEvent && isServing {
			t.Fatalf("%q is both an event and the serving announcement", line)
		}
		if isEvent {
			if e.Event == "" || !strings.HasPrefix(e.ID, "ns/") || !strings.HasPrefix(e.Election, "ns/") || e.Leader != "" && !strings.HasPrefix(e.Leader, "ns/") {
				t.Fatalf("%q: event %+v outside its namespace or unnamed", line, e)
			}
		}
	})
}

func TestKindOverlayAndElection(t *testing.T) {
	for _, c := range []struct{ alg, lock, overlay string }{
		{balance.Default, bld.LockLease, "default"},
		{balance.Default, bld.LockEndpoints, "default-endpoints"},
		{balance.BLDLiteral, bld.LockLease, "bld"},
		{balance.Ranked, bld.LockLease, "ranked"},
	} {
		got, err := overlay(c.alg, c.lock)
		assert.NoError(t, err)
		assert.Equal(t, c.overlay, got)
	}
	_, err := overlay(balance.BLD, bld.LockEndpoints)
	assert.ErrorContains(t, err, "default-endpoints")
	assert.Equal(t, "two-nodes", electionOf("two-nodes-5d8f7c9b6-x2x9k"))
	assert.Equal(t, "app", electionOf("app-5d8f7c9b6-x2x9k"))
}
