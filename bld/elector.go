package bld

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// Gate decides whether this candidate may try to take the lease now.
// observed is the current record (nil when there is none); expiredFor is
// how long ago the holder's lease ran out by this candidate's clock (zero
// when there is no holder).
type Gate func(ctx context.Context, observed *resourcelock.LeaderElectionRecord, expiredFor time.Duration) (bool, error)

// ElectorConfig configures an Elector.
type ElectorConfig struct {
	Lock                                      resourcelock.Interface
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// Gate, when set, is consulted before every acquisition (never
	// before a renewal): BLD's balance condition, ranked's stagger.
	Gate Gate
	// AfterAttempt learns whether an acquisition the gate allowed won.
	AfterAttempt func(ctx context.Context, won bool)
	// Prefetch, when set, runs beside the read of the lock whenever the
	// lease may be free, so a gate that needs more API reads (BLD's
	// record) does not add their round trips to the election's.
	Prefetch func(ctx context.Context)
	// Unclaimed, when set with Prefetch, is asked on a candidate's first
	// try, after Prefetch (which then runs alone): true means nobody has
	// claimed the election yet (BLD: the record holds no entry for it), so
	// the lock most likely does not exist and the elector, past the gate,
	// creates it without reading it first. Create fails if the lock exists
	// after all; the next try reads it. The gate still comes first, so a
	// reservation still precedes the lease.
	Unclaimed func() bool
	// Validate, when set, is asked after this candidate took the lease
	// from previous (or created it: previous "") and before it leads:
	// bld-optimistic writes the lease first and checks its node against
	// the elections committed before its write. false (or an error) frees
	// the lease at once and counts as a refusal.
	Validate func(ctx context.Context, previous string) (bool, error)
	// OnRefused, when set, learns of every refusal by the rule: the gate
	// said no to a free lease, or validation freed a taken one. A
	// candidate refused again a retry period after its first refusal,
	// with nothing else changing, is starved: kube-distribution's
	// constrained placement ends its wait on that evidence.
	OnRefused func()
	// GateRetry is the first wait after the gate refused a free lease
	// (default RetryPeriod), doubling up to RetryPeriod while refusals go
	// on: the balance can change as soon as another application's
	// reservation settles, long before a retry period. A gate that
	// refuses with ErrReserved (another candidate is taking the lease)
	// waits a retry period, like a follower.
	GateRetry time.Duration
	// Handover, when set, names who gets the lease when this leader stops
	// (graceful shutdown); "" releases it for anyone. done, if not nil,
	// runs once the record names the successor.
	Handover func(ctx context.Context) (successor string, done func())

	OnStartedLeading func(ctx context.Context)
	OnStoppedLeading func()
	OnNewLeader      func(identity string)

	// Kick makes a waiting candidate try at once (a hand-over landed).
	Kick <-chan struct{}
	Log  *slog.Logger
	// Clock is the elector's time (default the real one). Tests inject a
	// fake one, as client-go's LeaderElectionConfig allows "for less
	// flaky testing".
	Clock clock.Clock
}

// Elector runs the acquire/renew loop of client-go's LeaderElector with
// the hooks the BLD family and ranked succession need. Expiry is judged
// by when this candidate last saw the record change, as client-go does,
// so clock skew between candidates does not matter.
type Elector struct {
	cfg          ElectorConfig
	observed     *resourcelock.LeaderElectionRecord
	observedRaw  []byte
	observedTime time.Time
	reported     string
	refused      bool // the last try found the lease free but the gate said no
	// The last try found a holder that may still fail validation: one
	// this candidate has seen hold the lease for less than a retry period.
	tentative   bool
	holderSince time.Time     // when this candidate first saw the current holder
	tried       bool          // a try has run
	gateWait    time.Duration // current wait after refusals, doubling
	held        bool          // leading: acquired, and renewing since
	renewNow    bool          // the first renewal is due at once (a hand-over taken without a write)
}

// NewElector returns an elector; Run drives it.
func NewElector(cfg ElectorConfig) *Elector {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Elector{cfg: cfg}
}

// Run campaigns until ctx ends: acquire, lead while renewals succeed, and
// campaign again after losing the lease. On ctx end a leader releases the
// lease, or hands it over.
func (e *Elector) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if !e.acquire(ctx) {
			return
		}
		e.held = true
		lctx, cancel := context.WithCancel(ctx)
		if e.cfg.OnStartedLeading != nil {
			go e.cfg.OnStartedLeading(lctx)
		}
		e.renew(ctx)
		e.held = false
		cancel()
		if ctx.Err() != nil {
			e.release()
		}
		if e.cfg.OnStoppedLeading != nil {
			e.cfg.OnStoppedLeading()
		}
	}
}

func (e *Elector) acquire(ctx context.Context) bool {
	for {
		if e.try(ctx) {
			return true
		}
		t := e.cfg.Clock.NewTimer(wait.Jitter(e.nextWait(), 0.2))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-e.cfg.Kick:
			t.Stop()
		case <-t.C():
		}
	}
}

// nextWait is how long to wait (before jitter) after a try that did not
// acquire: a retry period, or after the gate refused a free lease (or, under
// Validate, a new holder was found) the GateRetry backoff, doubling while
// that goes on.
func (e *Elector) nextWait() time.Duration {
	switch {
	case !e.refused && !e.tentative || e.cfg.GateRetry <= 0:
		e.gateWait = 0
		return e.cfg.RetryPeriod
	case e.gateWait == 0:
		e.gateWait = e.cfg.GateRetry
	default: // refused again: back off towards the retry period
		e.gateWait = min(2*e.gateWait, e.cfg.RetryPeriod)
	}
	return e.gateWait
}

// renew renews every retry period; a leader that cannot renew for the
// renew deadline (trying every quarter retry period) has lost the lease.
func (e *Elector) renew(ctx context.Context) {
	for {
		wait := e.cfg.RetryPeriod
		if e.renewNow {
			wait, e.renewNow = 0, false
		}
		if !e.sleep(ctx, wait) {
			return
		}
		if !e.renewOnce(ctx) {
			if ctx.Err() == nil {
				e.cfg.Log.Warn("lost the lease", "lock", e.cfg.Lock.Describe())
			}
			return
		}
	}
}

// renewOnce tries until a renewal succeeds or the renew deadline passes.
// Requests also carry the deadline in real time, so a hung one cannot
// hold a leader past it.
func (e *Elector) renewOnce(ctx context.Context) bool {
	rctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	deadline := e.cfg.Clock.Now().Add(e.cfg.RenewDeadline)
	for !e.try(rctx) {
		if rctx.Err() != nil || !e.cfg.Clock.Now().Before(deadline) || !e.sleep(rctx, e.cfg.RetryPeriod/4) {
			return false
		}
	}
	return true
}

// sleep waits d on the elector's clock; false when ctx ended first.
func (e *Elector) sleep(ctx context.Context, d time.Duration) bool {
	t := e.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// IsLeader reports whether the last observed record names this candidate.
func (e *Elector) IsLeader() bool {
	return e.observed != nil && e.observed.HolderIdentity == e.cfg.Lock.Identity()
}

// Leader returns the last observed holder.
func (e *Elector) Leader() string {
	if e.observed == nil {
		return ""
	}
	return e.observed.HolderIdentity
}

func (e *Elector) setObserved(rec *resourcelock.LeaderElectionRecord, raw []byte, at time.Time) {
	e.observed, e.observedRaw, e.observedTime = rec, raw, at
	if rec.HolderIdentity != e.reported {
		e.reported, e.holderSince = rec.HolderIdentity, at
		if e.cfg.OnNewLeader != nil && rec.HolderIdentity != "" {
			e.cfg.OnNewLeader(rec.HolderIdentity)
		}
	}
}

// try acquires or renews once and reports whether this candidate holds
// the lease afterwards.
func (e *Elector) try(ctx context.Context) bool {
	id := e.cfg.Lock.Identity()
	now := e.cfg.Clock.Now()
	rec := resourcelock.LeaderElectionRecord{
		HolderIdentity:       id,
		LeaseDurationSeconds: int(e.cfg.LeaseDuration / time.Second),
		RenewTime:            metav1.NewTime(now),
		AcquireTime:          metav1.NewTime(now),
	}
	e.refused, e.tentative = false, false
	first := !e.tried
	e.tried = true
	var prefetched chan struct{}
	switch {
	case first && e.cfg.Unclaimed != nil && e.cfg.Prefetch != nil:
		// A new election's candidates all find the lock absent: skipping
		// that read takes a round trip off BLD's critical path, which has
		// one more than the default election's (the reservation).
		e.cfg.Prefetch(ctx)
		if e.cfg.Unclaimed() {
			return e.create(ctx, rec, now, e.cfg.Clock.Now())
		}
	case e.cfg.Prefetch != nil && e.mayBeFree(now):
		prefetched = make(chan struct{})
		go func() { defer close(prefetched); e.cfg.Prefetch(ctx) }()
	}
	old, raw, err := e.cfg.Lock.Get(ctx)
	if prefetched != nil {
		<-prefetched
	}
	read := e.cfg.Clock.Now()
	if err != nil {
		if !apierrors.IsNotFound(err) {
			e.cfg.Log.Debug("reading the lock failed", "err", err)
			return false
		}
		return e.create(ctx, rec, now, read)
	}
	if !bytes.Equal(raw, e.observedRaw) || e.observed == nil {
		e.setObserved(old, raw, now)
	}
	holder := old.HolderIdentity
	expires := e.observedTime.Add(time.Duration(old.LeaseDurationSeconds) * time.Second)
	if holder != "" && holder != id && expires.After(now) {
		// Under Validate a new holder may yet free the lease (its node
		// did not qualify): look again soon rather than a retry period on.
		e.tentative = e.cfg.Validate != nil && now.Sub(e.holderSince) < e.cfg.RetryPeriod
		return false
	}
	if holder == id && !e.held && e.handedOver(old, now) {
		// A hand-over: the last holder wrote this candidate in, with a
		// fresh renewal. It leads from here, as from an acquisition of its
		// own, and renews at once rather than before it starts — the
		// successor's write was the hand-over's last round trip.
		e.renewNow = true
		return true
	}
	if holder == id {
		rec.AcquireTime, rec.LeaderTransitions = old.AcquireTime, old.LeaderTransitions
	} else {
		rec.LeaderTransitions = old.LeaderTransitions + 1
		// A released lease (no holder) has been free since it was seen so.
		expired := now.Sub(e.observedTime)
		if holder != "" {
			expired = now.Sub(expires)
		}
		if !e.gate(ctx, old, expired) {
			e.logAttempt(now, read, e.cfg.Clock.Now(), errRefused)
			return false
		}
	}
	gated := e.cfg.Clock.Now()
	err = e.cfg.Lock.Update(ctx, rec)
	if holder != id {
		e.logAttempt(now, read, gated, err)
		e.attempted(ctx, err == nil)
	}
	if err != nil {
		return false
	}
	e.setObserved(&rec, nil, now)
	if holder != id {
		return e.validate(ctx, holder, rec)
	}
	return true
}

// validate asks Validate whether this new holder may lead; when not, it
// frees the lease at once, so a candidate that qualifies need not wait
// it out.
func (e *Elector) validate(ctx context.Context, previous string, rec resourcelock.LeaderElectionRecord) bool {
	if e.cfg.Validate == nil {
		return true
	}
	ok, err := e.cfg.Validate(ctx, previous)
	if ok && err == nil {
		return true
	}
	switch {
	case err == nil:
		err = errInvalid
		e.onRefused()
	case !errors.Is(err, ErrReserved):
		e.cfg.Log.Warn("validating the acquisition failed", "err", err)
	}
	now := e.cfg.Clock.Now()
	e.logAttempt(now, now, now, err)
	e.refused = true
	if err := e.free(ctx, "", rec); err != nil {
		e.cfg.Log.Warn("freeing the lease failed", "err", err)
	} else {
		// Seen free, so the next try reads the record again first.
		e.setObserved(&resourcelock.LeaderElectionRecord{LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1}, nil, e.cfg.Clock.Now())
	}
	return false
}

// handedOver reports whether old, a record naming this candidate that
// it has not been renewing, was written within a retry period by the
// clocks' reckoning (either way: another node's clock may run ahead).
func (e *Elector) handedOver(old *resourcelock.LeaderElectionRecord, now time.Time) bool {
	age := now.Sub(old.RenewTime.Time)
	return age < e.cfg.RetryPeriod && -age < e.cfg.RetryPeriod
}

// create takes the lock by creating it, if the gate allows: the lock was
// found absent at read, or is presumed so.
func (e *Elector) create(ctx context.Context, rec resourcelock.LeaderElectionRecord, start, read time.Time) bool {
	if !e.gate(ctx, nil, 0) {
		e.logAttempt(start, read, e.cfg.Clock.Now(), errRefused)
		return false
	}
	gated := e.cfg.Clock.Now()
	err := e.cfg.Lock.Create(ctx, rec)
	e.logAttempt(start, read, gated, err)
	e.attempted(ctx, err == nil)
	if err != nil {
		return false
	}
	e.setObserved(&rec, nil, start)
	return e.validate(ctx, "", rec)
}

func (e *Elector) gate(ctx context.Context, old *resourcelock.LeaderElectionRecord, expired time.Duration) bool {
	if e.cfg.Gate == nil {
		return true
	}
	ok, err := e.cfg.Gate(ctx, old, expired)
	if errors.Is(err, ErrReserved) {
		return false
	}
	if err != nil {
		e.cfg.Log.Warn("acquisition gate failed", "err", err)
	}
	e.refused = !ok || err != nil
	if !ok && err == nil {
		e.onRefused()
	}
	return ok && err == nil
}

func (e *Elector) onRefused() {
	if e.cfg.OnRefused != nil {
		e.cfg.OnRefused()
	}
}

// mayBeFree reports whether, as far as this candidate knows, the lease
// could be taken now: never seen, released, or expired.
func (e *Elector) mayBeFree(now time.Time) bool {
	if e.observed == nil || e.observed.HolderIdentity == "" {
		return true
	}
	if e.observed.HolderIdentity == e.cfg.Lock.Identity() {
		return false
	}
	return !e.observedTime.Add(time.Duration(e.observed.LeaseDurationSeconds) * time.Second).After(now)
}

var (
	errRefused = errors.New("refused by the gate")
	errInvalid = errors.New("taken, then refused by validation: freed")
)

// logAttempt times an acquisition attempt's phases for the debug log:
// reading the lock (with the read-ahead), the gate, and the write.
func (e *Elector) logAttempt(start, read, gated time.Time, err error) {
	e.cfg.Log.Debug("acquisition attempt", "won", err == nil, "err", err,
		"read", read.Sub(start), "gate", gated.Sub(read), "write", e.cfg.Clock.Since(gated))
}

func (e *Elector) attempted(ctx context.Context, won bool) {
	if e.cfg.AfterAttempt != nil {
		e.cfg.AfterAttempt(ctx, won)
	}
}

// release gives the lease up (holder "") or hands it to a successor, so
// nobody waits out the lease.
func (e *Elector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.RenewDeadline)
	defer cancel()
	// The leader's own last renewal is the record to write over: no read
	// first (a hand-over's round trips are the successor's wait). Should
	// someone have written since, the write fails and the lock is read.
	if !e.IsLeader() {
		return
	}
	old := *e.observed
	next, done := "", func() {}
	if e.cfg.Handover != nil {
		if n, d := e.cfg.Handover(ctx); n != "" {
			next = n
			if d != nil {
				done = d
			}
		}
	}
	if e.free(ctx, next, old) != nil {
		cur, _, err := e.cfg.Lock.Get(ctx)
		if err != nil || cur.HolderIdentity != e.cfg.Lock.Identity() {
			return
		}
		if err := e.free(ctx, next, *cur); err != nil {
			e.cfg.Log.Warn("releasing the lease failed", "err", err)
			return
		}
	}
	done()
}

// free writes held, a record this candidate holds, over to next: nobody
// ("", a lease of one second, so nobody waits it out) or a successor.
func (e *Elector) free(ctx context.Context, next string, held resourcelock.LeaderElectionRecord) error {
	now := metav1.NewTime(e.cfg.Clock.Now())
	rec := resourcelock.LeaderElectionRecord{
		HolderIdentity: next, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
		LeaderTransitions: held.LeaderTransitions,
	}
	if next != "" {
		rec.LeaseDurationSeconds = held.LeaseDurationSeconds
		rec.LeaderTransitions++
	}
	return e.cfg.Lock.Update(ctx, rec)
}
