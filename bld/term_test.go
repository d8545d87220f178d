package bld

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ringside/ringside/bld/balance"
)

// What the sidecar says: the freshest record's holder and term, never
// this candidate once it stopped leading or its last renewal is a renew
// deadline old by its clock.
func TestLeaderTermFollowsTheFreshestRecord(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	c, err := NewCandidate(CandidateConfig{Algorithm: balance.BLD, Election: "app", Namespace: "ns", Identity: "me", Node: "w1",
		Client: fake.NewSimpleClientset(), LeaseDuration: 10 * time.Second, RenewDeadline: 8 * time.Second, RetryPeriod: 2 * time.Second, Clock: fc})
	require.NoError(t, err)

	c.setLeader("x") // a callback before any record was read
	l, _, ok := c.LeaderTerm()
	assert.Equal(t, "x", l)
	assert.False(t, ok, "no term before a record")

	c.noteRecord("y", 3, false)
	l, term, ok := c.LeaderTerm()
	assert.Equal(t, [3]any{"y", 3, true}, [3]any{l, term, ok}, "the record outranks the callback")

	c.noteRecord("me", 4, true) // acquired
	l, _, _ = c.LeaderTerm()
	assert.Empty(t, l, "not before the elector says it leads")
	c.mu.Lock()
	c.leading = true
	c.mu.Unlock()
	l, term, ok = c.LeaderTerm()
	assert.Equal(t, [3]any{"me", 4, true}, [3]any{l, term, ok})

	fc.Step(7 * time.Second)
	c.noteRecord("me", 4, false) // a read: not a renewal
	fc.Step(time.Second)
	l, _, _ = c.LeaderTerm()
	assert.Empty(t, l, "a renew deadline after the last renewal, whatever the elector believes")
	c.noteRecord("me", 4, true)
	l, _, _ = c.LeaderTerm()
	assert.Equal(t, "me", l, "renewed")

	c.noteRecord("z", 5, false) // woken from a pause: the first read shows a successor
	l, term, _ = c.LeaderTerm()
	assert.Equal(t, "z", l)
	assert.Equal(t, 5, term)

	c.noteRecord("", 5, false) // released
	l, _, ok = c.LeaderTerm()
	assert.Empty(t, l)
	assert.False(t, ok)
}
