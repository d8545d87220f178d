package bld

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
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

// orderLock notes, at each write, the events sent before it.
type orderLock struct {
	annotatedLock
	events *[]string
	seen   [][]string
}

func (l *orderLock) Identity() string { return "me" }
func (l *orderLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	l.seen = append(l.seen, slices.Clone(*l.events))
	return nil
}

// A leader's "stopped" comes before the write that gives its lease up, not
// whenever the goroutine waiting for the end of its leadership runs: the
// successor's "started" cannot precede it. Renewals end nothing, and the
// leadership's own end sends no second "stopped". A release names nobody;
// a hand-over names the successor it writes.
func TestStoppedPrecedesTheRelease(t *testing.T) {
	var events []string
	c, err := NewCandidate(CandidateConfig{Algorithm: balance.Default, Election: "app", Namespace: "ns", Identity: "me", Node: "w1",
		Client: fake.NewSimpleClientset(), LeaseDuration: 10 * time.Second, RenewDeadline: 8 * time.Second, RetryPeriod: 2 * time.Second,
		OnEvent: func(e, to string) { events = append(events, e+" "+to) }})
	require.NoError(t, err)
	l := &orderLock{events: &events}
	lock := termLock{l, c.noteRecord, c.endLeadership}
	c.announced = true // "started" was sent

	ctx := context.Background()
	require.NoError(t, lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me"}))
	require.NoError(t, lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: ""}))
	c.endLeadership("") // the leader context's end, later
	require.NoError(t, lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "next"}))
	assert.Equal(t, [][]string{nil, {"stopped "}, {"stopped "}}, l.seen, "events sent before each write: a renewal, the release, a hand-over")
	assert.Equal(t, []string{"stopped "}, events)

	c.announced = true // led again
	require.NoError(t, lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "next"}))
	assert.Equal(t, []string{"stopped ", "stopped next"}, events, "a hand-over names its successor")
}
