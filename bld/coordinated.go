package bld

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/ringside/ringside/bld/strategy"
)

// Coordinated leader election (KEP-4355) with the ringside.io/balanced
// strategy: the candidate registers a LeaseCandidate and never takes the
// Lease itself; it leads when the strategy controller (bld/cle) names it
// holder, through client-go's elector in its coordinated mode, and steps
// down as soon as the controller marks another preferred holder.
//
// Two rules keep kube-apiserver v1.32 alive beside it. Its own election
// controller dereferences a Lease's holder without a nil check
// (leaderelection_controller.go:377, fixed in v1.33) whenever it reaches
// a Lease of a third-party strategy that has candidates and no holder.
// So no Lease here is ever without one: the first candidate creates it
// held by Unassigned and already run out, and a leader leaving does not
// clear the holder as client-go's release would — it backdates its own
// renewal so the Lease runs out at once (expire).

// Unassigned holds a coordinated Lease before the controller names its
// first holder; no candidate has this identity (it is not a Pod name).
const Unassigned = "ringside.io/unassigned"

// binaryVersion is what a candidate's LeaseCandidate gives as its binary
// version: required, a semantic version, and read only by the built-in
// OldestEmulationVersion strategy — the version of this candidate
// protocol, not of a Kubernetes component.
const binaryVersion = "1.0.0"

// NodeAnnotation on a LeaseCandidate names the candidate's node, for the
// strategy controller to count leaders per node.
const NodeAnnotation = "ringside.io/node"

// On a candidate Pod (ElectionLabel) of the ringside.io/balanced
// strategy: the strategy, and the lease duration its candidates run
// (--lease-duration). With both, the strategy controller names the
// election's first holder from the Pods, creating its Lease, before any
// candidate has started.
const (
	StrategyAnnotation      = "ringside.io/strategy"
	LeaseDurationAnnotation = "ringside.io/lease-duration"
)

// runCoordinated campaigns until ctx ends: register, then lead each time
// the Lease names this candidate.
func (c *Candidate) runCoordinated(ctx context.Context, started func(context.Context)) error {
	// The watch starts beside the writes. The Lease comes before the
	// registration, never beside it: v1.32's own election controller,
	// finding a candidate of a third-party strategy whose Lease does not
	// exist, creates that Lease without a holder and then crashes the API
	// server on it (below, ensureCoordinatedLease).
	leases := c.watchLease(ctx)
	if err := c.ensureCoordinatedLease(ctx); err != nil {
		return err
	}
	// A candidate the controller named from its Pod leads at once and
	// registers beside its leadership (the controller counts it at its
	// Pod meanwhile); the others register before they wait. A failed
	// registration ends the campaign either way.
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	registered := make(chan struct{})
	var regErr error // read once registered is closed
	go func() {
		defer close(registered)
		if regErr = c.register(ctx); regErr != nil {
			fail(regErr)
		}
	}()
	if !c.named() {
		<-registered
	}
	// The candidate answers pings until it leaves (below): its own
	// context, so that it outlives ctx by the unregistering.
	lcCtx, stopCandidate := context.WithCancel(context.Background())
	defer stopCandidate()
	go c.answerPings(lcCtx)
	ended := func() error {
		<-registered // leave unregisters what register made
		c.leave()
		if regErr != nil && context.Cause(ctx) == regErr {
			return regErr // the campaign ended for it, not for ctx
		}
		return nil
	}
	for {
		// Wait until named.
		for !c.named() {
			select {
			case <-ctx.Done():
				return ended()
			case l := <-leases:
				c.noteLease(l)
			}
		}
		c.lead(ctx, leases, started)
		if ctx.Err() != nil {
			return ended()
		}
	}
}

// lead makes this candidate the leader while the Lease names it. The
// controller's write gave it a term already (holder and renewal), so it
// leads from the moment it sees that — client-go's coordinated elector
// would first read the Lease and renew it, two round trips more before
// its OnStartedLeading — and the elector renews the term from then on.
// Until the elector's first renewal, the term the controller wrote bounds
// the leadership: it ends by that renewal plus the renew deadline, as
// client-go's own leadership ends by its last renewal plus the renew
// deadline. A term seen too late for that leads only once renewed.
// Leadership ends when the Lease stops naming this candidate (a move), a
// renewal fails, or ctx ends; a leader that stops lets the Lease run out
// behind it, after its "stopped".
func (c *Candidate) lead(ctx context.Context, leases <-chan *coordinationv1.Lease, started func(context.Context)) {
	ectx, stop := context.WithCancelCause(ctx)
	cancel := func() { stop(nil) }
	defer cancel()
	renewedCh := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: c.lock, LeaseDuration: c.cfg.LeaseDuration, RenewDeadline: c.cfg.RenewDeadline, RetryPeriod: c.cfg.RetryPeriod,
		Coordinated: true, Name: c.cfg.Election,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				close(renewedCh)
				<-lctx.Done() // a failed renewal
				cancel()
			},
			OnStoppedLeading: func() {}, OnNewLeader: c.setLeader},
	})
	if err != nil { // only for a configuration NewCandidate already checked
		c.cfg.Log.Error("coordinated elector", "err", err)
		<-ctx.Done()
		return
	}
	var led chan struct{} // closed when started returns; nil while not leading
	leadNow := func() {
		led = make(chan struct{})
		go func() { defer close(led); started(ectx) }()
	}
	renewed := renewedCh // nil once renewed
	var termOver <-chan time.Time
	// Once per term: a candidate that stepped down at its end is named
	// by the same Lease still, if that renewal is ahead of its clock.
	if on, left := c.term(c.cfg.Clock.Now()); left > 0 && !on.Equal(c.ledOn) {
		c.ledOn = on
		leadNow()
		termOver = c.cfg.Clock.After(left)
	}
	done := make(chan struct{})
	go func() { defer close(done); le.Run(ectx) }()
	for {
		select {
		case <-done:
			cancel()
			if led != nil {
				<-led
			}
			if ctx.Err() == nil { // leaving: leave unregisters first
				c.expire()
			}
			return
		case <-renewed:
			renewed, termOver = nil, nil
			if led == nil {
				leadNow()
			}
		case <-termOver:
			c.cfg.Log.Warn("stepping down: no renewal within the term the controller gave", "election", c.cfg.Election)
			cancel()
		case l := <-leases:
			c.noteLease(l)
			// Not named any more: a leader that is asked to hand over
			// steps down at once (client-go would lead on until its renew
			// deadline, which ends as the Lease runs out — the moment the
			// controller may name the next one), and an elector that has
			// not taken the Lease yet would only fail every retry period.
			if why := c.notNamed(); why != "" {
				if led != nil {
					c.cfg.Log.Info("stepping down", "why", why)
				}
				// The successor is the one named now: a Lease seen after
				// this step-down (another write before the leader's
				// goroutine wakes) must not change whom it stepped down for.
				stop(movedAway{c.movedTo()})
			}
		}
	}
}

// term is the renewal of the Lease as last seen, and how long from now a
// leadership that began on it may last without a renewal of its own:
// until that renewal (never later than now) plus the renew deadline.
func (c *Candidate) term(now time.Time) (renewed time.Time, left time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lease == nil || c.lease.Spec.RenewTime == nil {
		return time.Time{}, 0
	}
	// Never past the Lease's own duration either: the controller, which
	// wrote the term, may name another holder once that has run out (a
	// holder named from its Pod gets the duration its Pod announced).
	bound := min(c.cfg.RenewDeadline, leaseDuration(c.lease, c.cfg.LeaseDuration))
	return c.lease.Spec.RenewTime.Time, renewedBy(c.lease, now).Add(bound).Sub(now)
}

// renewedBy is l's renewal, but never later than now: a renewal time
// ahead of this candidate's clock (another clock, or a hostile writer)
// must not stretch a leadership past what a renewal of its own now would
// give.
func renewedBy(l *coordinationv1.Lease, now time.Time) time.Time {
	if t := l.Spec.RenewTime.Time; t.Before(now) {
		return t
	}
	return now
}

// named reports whether the Lease as last seen names this candidate
// holder, valid by this candidate's clock (a Lease it let run out does
// not invite it back), with no move away under way.
func (c *Candidate) named() bool { return c.notNamed() == "" }

// notNamed is why the Lease as last seen does not name this candidate
// ("" when it does): no holder, another holder, a move away, or a term
// run out by this candidate's clock — for named, and for a step-down's
// log line.
func (c *Candidate) notNamed() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.lease
	switch {
	case l == nil || l.Spec.HolderIdentity == nil:
		return "no holder"
	case *l.Spec.HolderIdentity != c.cfg.Identity:
		return "held by " + *l.Spec.HolderIdentity
	case l.Spec.PreferredHolder != nil && *l.Spec.PreferredHolder != "" && *l.Spec.PreferredHolder != c.cfg.Identity:
		return "moved to " + *l.Spec.PreferredHolder
	case l.Spec.RenewTime == nil:
		return "no renewal"
	}
	if end := l.Spec.RenewTime.Add(leaseDuration(l, c.cfg.LeaseDuration)); !c.cfg.Clock.Now().Before(end) {
		return "its term ran out at " + end.Format(time.RFC3339Nano)
	}
	return ""
}

// movedTo is the candidate the controller moves this one's leadership to,
// as the Lease was last seen ("" for none).
func (c *Candidate) movedTo() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.lease; l != nil && l.Spec.PreferredHolder != nil && *l.Spec.PreferredHolder != c.cfg.Identity {
		return *l.Spec.PreferredHolder
	}
	return ""
}

// movedAway is why a coordinated leader's context ended when the Lease
// stopped naming it: to is the candidate a move named then ("" for none).
type movedAway struct{ to string }

func (m movedAway) Error() string { return "not named any more; moved to " + strconv.Quote(m.to) }

// successor is the candidate a leadership that ended with ctx was handed
// to: the one the move that ended it named, or nobody (a release, a
// renewal lost, the campaign's end).
func successor(ctx context.Context) string {
	var m movedAway
	if errors.As(context.Cause(ctx), &m) {
		return m.to
	}
	return ""
}

// leaseDuration is l's duration, or def where it has none.
func leaseDuration(l *coordinationv1.Lease, def time.Duration) time.Duration {
	if l.Spec.LeaseDurationSeconds != nil {
		return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return def
}

// noteLease keeps the Lease as last seen and tells the sidecar who holds
// it.
func (c *Candidate) noteLease(l *coordinationv1.Lease) {
	c.mu.Lock()
	stale := c.lease != nil && OlderVersion(l, c.lease)
	c.mu.Unlock()
	if stale { // the watch's first list may be older than a read beside it
		return
	}
	holder, transitions := "", 0
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != Unassigned {
		holder = *l.Spec.HolderIdentity
	}
	if l.Spec.LeaseTransitions != nil {
		transitions = int(*l.Spec.LeaseTransitions)
	}
	c.noteRecord(holder, transitions, false)
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	c.lease = l
	changed := holder != c.leader
	// The controller names a holder by renewing the term in its name: as
	// good as a renewal of this candidate's own (lead), for the sidecar.
	if holder == c.cfg.Identity && l.Spec.RenewTime != nil {
		if at := renewedBy(l, now); at.After(c.renewedAt) {
			c.renewedAt = at
		}
	}
	c.mu.Unlock()
	if changed {
		c.setLeader(holder)
	}
}

// OlderVersion reports whether a is an older version of the Lease than
// b, by their resourceVersions where both are integers (the API server's
// are; where they are not, neither counts as older).
func OlderVersion(a, b *coordinationv1.Lease) bool {
	x, err1 := strconv.ParseUint(a.ResourceVersion, 10, 64)
	y, err2 := strconv.ParseUint(b.ResourceVersion, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

// watchLease sends the election's Lease on every change, the latest only.
func (c *Candidate) watchLease(ctx context.Context) <-chan *coordinationv1.Lease {
	out := make(chan *coordinationv1.Lease, 1)
	send := func(obj any) {
		l, ok := obj.(*coordinationv1.Lease)
		if !ok {
			return
		}
		for {
			select {
			case out <- l:
				return
			default:
			}
			select { // drop the stale one
			case <-out:
			default:
			}
		}
	}
	f := c.watchOne(c.cfg.Election)
	inf := f.Coordination().V1().Leases().Informer()
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: send, UpdateFunc: func(_, n any) { send(n) }})
	f.Start(ctx.Done())
	return out
}

// watchOne is an informer factory for the objects named name in the
// candidate's namespace: all a namespaced Role lets it list.
func (c *Candidate) watchOne(name string) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(c.cfg.Client, 0, informers.WithNamespace(c.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
}

// ensureCoordinatedLease creates the election's Lease for the strategy,
// held by Unassigned and already run out, unless it exists; an existing
// one gets the strategy if it has none. It reads first: the controller
// creates the Lease of an election whose Pods announce the strategy
// before the candidates start, naming one of them, which then leads on
// this read.
func (c *Candidate) ensureCoordinatedLease(ctx context.Context) error {
	leases := c.cfg.Client.CoordinationV1().Leases(c.cfg.Namespace)
	st := coordinationv1.CoordinatedLeaseStrategy(strategy.Name)
	l, err := leases.Get(ctx, c.cfg.Election, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		now := c.cfg.Clock.Now()
		secs := int32(max(1, c.cfg.LeaseDuration/time.Second))
		holder := Unassigned
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: c.cfg.Election, Namespace: c.cfg.Namespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, Strategy: &st, LeaseDurationSeconds: &secs,
				RenewTime: &metav1.MicroTime{Time: now.Add(-time.Duration(secs) * time.Second)}},
		}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return fmt.Errorf("candidate %s: creating the coordinated Lease: %w", c.cfg.Identity, err)
			}
			return nil
		}
		l, err = leases.Get(ctx, c.cfg.Election, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("candidate %s: reading the Lease: %w", c.cfg.Identity, err)
	}
	if l.Spec.Strategy != nil && *l.Spec.Strategy == st {
		c.noteLease(l) // named already: it leads without waiting for its watch
		return nil
	}
	holder := Unassigned
	l.Spec.Strategy = &st
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		l.Spec.HolderIdentity = &holder // never holderless (v1.32, above)
	}
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("candidate %s: giving the Lease its strategy: %w", c.cfg.Identity, err)
	}
	return nil
}

// expire ends this candidate's hold on the Lease, if it still has it, by
// backdating its renewal a lease duration: the Lease keeps a holder (see
// above) and is free at once.
func (c *Candidate) expire() {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RenewDeadline)
	defer cancel()
	leases := c.cfg.Client.CoordinationV1().Leases(c.cfg.Namespace)
	l, err := leases.Get(ctx, c.cfg.Election, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != c.cfg.Identity {
		return
	}
	l.Spec.RenewTime = &metav1.MicroTime{Time: c.cfg.Clock.Now().Add(-leaseDuration(l, c.cfg.LeaseDuration))}
	l, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		c.cfg.Log.Warn("letting the Lease run out", "err", err)
		return
	}
	c.noteLease(l) // before its watch event: not named any more
}
