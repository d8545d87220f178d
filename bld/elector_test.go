package bld

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
)

// memStore is one lock object in memory; memLock is a candidate's view of
// it. Unit tests of the elector's paths run on them with a fake clock.
type memStore struct {
	mu          sync.Mutex
	rec         *resourcelock.LeaderElectionRecord
	failUpdates atomic.Bool
	gets        atomic.Int32
	updates     atomic.Int32
}

type memLock struct {
	s  *memStore
	id string
}

var leases = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

func (l memLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.s.gets.Add(1)
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.rec == nil {
		return nil, nil, apierrors.NewNotFound(leases, "app")
	}
	cp := *l.s.rec
	raw, _ := json.Marshal(cp)
	return &cp, raw, nil
}

func (l memLock) Create(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.rec != nil {
		return apierrors.NewAlreadyExists(leases, "app")
	}
	l.s.rec = &r
	return nil
}

func (l memLock) Update(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	if l.s.failUpdates.Load() {
		return errors.New("the API server is unreachable")
	}
	l.s.updates.Add(1)
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.rec == nil {
		return apierrors.NewNotFound(leases, "app")
	}
	l.s.rec = &r
	return nil
}

func (l memLock) RecordEvent(string) {}
func (l memLock) Identity() string   { return l.id }
func (l memLock) Describe() string   { return "mem/app" }
func (s *memStore) holder() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rec == nil {
		return ""
	}
	return s.rec.HolderIdentity
}

func newTestElector(s *memStore, id string, fc *clocktesting.FakeClock, gate Gate) *Elector {
	return NewElector(ElectorConfig{
		Lock: memLock{s, id}, LeaseDuration: 10 * time.Second, RenewDeadline: 8 * time.Second, RetryPeriod: 2 * time.Second,
		Gate: gate, Clock: fc,
	})
}

func TestTryTakesAFreeLockAndWaitsOutAHolder(t *testing.T) {
	ctx := context.Background()
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	s := &memStore{}
	a, b := newTestElector(s, "a", fc, nil), newTestElector(s, "b", fc, nil)
	require.True(t, a.try(ctx), "an absent lock is created")
	assert.True(t, a.IsLeader())
	require.False(t, b.try(ctx), "a held lease is respected")
	assert.Equal(t, "a", b.Leader())

	// Expiry is judged by when b saw the record change, on b's clock.
	fc.Step(10*time.Second - time.Millisecond)
	assert.False(t, b.try(ctx), "not yet expired")
	fc.Step(time.Millisecond)
	require.True(t, b.try(ctx), "expired: b takes over")
	assert.Equal(t, "b", s.holder())
	assert.Equal(t, 1, s.rec.LeaderTransitions)
	assert.False(t, a.try(ctx), "a sees b's fresh lease")
}

func TestAReleasedLeaseIsFreeAtOnce(t *testing.T) {
	ctx := context.Background()
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	s := &memStore{}
	a, b := newTestElector(s, "a", fc, nil), newTestElector(s, "b", fc, nil)
	require.True(t, a.try(ctx))
	require.False(t, b.try(ctx))
	a.release()
	assert.Equal(t, "", s.holder())
	assert.True(t, b.try(ctx), "no waiting out the lease after a release")
}

func TestGateRefusalsBackOffToTheRetryPeriod(t *testing.T) {
	ctx := context.Background()
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	s := &memStore{}
	allow, reserved := false, false
	gate := func(context.Context, *resourcelock.LeaderElectionRecord, time.Duration) (bool, error) {
		if reserved {
			return false, ErrReserved
		}
		return allow, nil
	}
	e := newTestElector(s, "a", fc, gate)
	e.cfg.GateRetry = 50 * time.Millisecond
	var waits []time.Duration
	for range 8 {
		require.False(t, e.try(ctx))
		waits = append(waits, e.nextWait())
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2000 * ms, 2000 * ms}, waits)
	assert.Nil(t, s.rec, "a refused candidate writes nothing")

	// Another candidate's reservation: wait like a follower, and start
	// the backoff afresh afterwards.
	reserved = true
	require.False(t, e.try(ctx))
	assert.Equal(t, 2*time.Second, e.nextWait())
	reserved = false
	require.False(t, e.try(ctx))
	assert.Equal(t, 50*time.Millisecond, e.nextWait())

	allow = true
	assert.True(t, e.try(ctx))
}

// A leader hands over without reading the lock first, and its successor
// takes a fresh hand-over without a write of its own, renewing at once
// instead; a stale record naming a candidate is renewed before it leads.
func TestHandOverCostsOneWriteAndOneRead(t *testing.T) {
	ctx := context.Background()
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	s := &memStore{}
	a, b := newTestElector(s, "a", fc, nil), newTestElector(s, "b", fc, nil)
	a.cfg.Handover = func(context.Context) (string, func()) { return "b", nil }
	require.True(t, a.try(ctx))
	require.False(t, b.try(ctx))
	gets, updates := s.gets.Load(), s.updates.Load()
	a.release()
	assert.Equal(t, "b", s.holder())
	assert.Equal(t, 1, s.rec.LeaderTransitions, "a new tenure")
	assert.Equal(t, gets, s.gets.Load(), "the leader writes over its own last renewal")
	assert.Equal(t, updates+1, s.updates.Load())
	require.True(t, b.try(ctx), "b leads on the hand-over")
	assert.Equal(t, updates+1, s.updates.Load(), "without a write before it starts")
	assert.True(t, b.renewNow, "its first renewal is due at once")

	// A record naming c that nobody renewed for a retry period: c renews
	// it before it leads.
	fc.Step(20 * time.Second)
	c := newTestElector(&memStore{rec: &resourcelock.LeaderElectionRecord{HolderIdentity: "c", LeaseDurationSeconds: 10,
		RenewTime: metav1.NewTime(fc.Now().Add(-3 * time.Second))}}, "c", fc, nil)
	require.True(t, c.try(ctx))
	assert.Equal(t, int32(1), c.cfg.Lock.(memLock).s.updates.Load())
	assert.False(t, c.renewNow)
}

// bld-optimistic's order: a first try that finds the election unclaimed
// (after the prefetch, its watch's first list) creates the lock without
// reading it, validation comes after the write, and a holder that fails
// it frees the lease at once; a lock that exists is read, and a follower
// is never validated.
func TestOptimisticValidatesAfterTheWrite(t *testing.T) {
	ctx := context.Background()
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	s := &memStore{}
	var prefetches atomic.Int32
	var validated []string
	refusals := map[string]int{}
	optimistic := func(id string, ok bool) *Elector {
		e := newTestElector(s, id, fc, nil)
		e.cfg.OnRefused = func() { refusals[id]++ }
		e.cfg.Prefetch = func(context.Context) { prefetches.Add(1) }
		e.cfg.Unclaimed = func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.rec == nil }
		e.cfg.Validate = func(_ context.Context, previous string) (bool, error) {
			validated = append(validated, id+" after "+previous)
			return ok, nil
		}
		return e
	}
	a := optimistic("a", false)
	require.False(t, a.try(ctx), "taken, refused by validation")
	assert.Equal(t, int32(0), s.gets.Load(), "the first try does not read the lock")
	assert.Equal(t, int32(1), prefetches.Load())
	assert.Equal(t, "", s.holder(), "freed at once")
	assert.False(t, a.IsLeader())
	assert.Equal(t, map[string]int{"a": 1}, refusals, "a refusal by the rule, reported")
	assert.Equal(t, 50*time.Millisecond, func() time.Duration { a.cfg.GateRetry = 50 * time.Millisecond; return a.nextWait() }(), "a refusal: the gate's backoff")

	b := optimistic("b", true)
	require.True(t, b.try(ctx), "a freed lease is taken at once")
	assert.Equal(t, "b", s.holder())
	assert.Equal(t, int32(1), s.gets.Load(), "the lock exists: b's first try reads it")
	assert.Equal(t, 1, s.rec.LeaderTransitions)

	c := optimistic("c", true)
	c.cfg.GateRetry = 50 * time.Millisecond
	require.False(t, c.try(ctx), "held by b")
	assert.Equal(t, "b", c.Leader())
	assert.Equal(t, 50*time.Millisecond, c.nextWait(), "b may yet free it: look again soon")
	fc.Step(2 * time.Second)
	require.True(t, b.try(ctx))
	require.False(t, c.try(ctx))
	assert.Equal(t, 2*time.Second, c.nextWait(), "b has held it a retry period: a follower's wait")
	assert.Equal(t, []string{"a after ", "b after "}, validated, "only holders are validated, with the holder they followed")
	assert.Len(t, validated, 2, "renewals are not validated")
	assert.Equal(t, map[string]int{"a": 1}, refusals, "a lease held by another is no refusal")
}

// A leader whose renewals fail steps down once the renew deadline has
// passed, not before — on the elector's clock.
func TestLeaderStepsDownAfterTheRenewDeadline(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	s := &memStore{}
	var startedAt, stoppedAt atomic.Int64
	e := newTestElector(s, "a", fc, nil)
	e.cfg.OnStartedLeading = func(context.Context) { startedAt.Store(fc.Now().UnixNano()) }
	e.cfg.OnStoppedLeading = func() { stoppedAt.Store(fc.Now().UnixNano()) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	require.Eventually(t, func() bool { return startedAt.Load() != 0 }, 5*time.Second, time.Millisecond)
	s.failUpdates.Store(true)
	failedAt := fc.Now()
	require.Eventually(t, func() bool {
		if fc.HasWaiters() {
			fc.Step(100 * time.Millisecond)
		}
		return stoppedAt.Load() != 0
	}, 5*time.Second, time.Millisecond)
	lostAfter := time.Duration(stoppedAt.Load() - failedAt.UnixNano())
	// The first failing renewal is a retry period after the last good
	// one; it keeps failing for the renew deadline.
	assert.GreaterOrEqual(t, lostAfter, 2*time.Second+8*time.Second)
	assert.LessOrEqual(t, lostAfter, 2*time.Second+8*time.Second+time.Second)
}
