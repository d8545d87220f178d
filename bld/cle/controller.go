// Package cle is the controller of the ringside.io/balanced strategy of
// Kubernetes' coordinated leader election (KEP-4355): the shell around
// bld/strategy's choices. It watches LeaseCandidates and Leases, asks
// candidates of a free Lease whether they are still there (pings),
// names each free Lease's holder and moves leaders back into balance
// through preferredHolder. All its state is in the API objects — the
// Leases and their moved-at annotations — so a replica that takes over
// carries on where the last one stopped.
package cle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/api/coordination/v1alpha2"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/ringside/ringside/bld"
	"github.com/ringside/ringside/bld/strategy"
)

// MovedAtAnnotation on a Lease is when the controller last set its
// preferredHolder (RFC 3339), so a replica that takes over keeps to one
// move per lease duration.
const MovedAtAnnotation = "ringside.io/moved-at"

// ControllerElection is the Lease the controller's replicas elect one of
// themselves on (cmd/cle-balanced --election), in their own namespace.
const ControllerElection = "ringside-cle-balanced"

// Config configures the controller.
type Config struct {
	Client kubernetes.Interface
	// Namespace limits the controller to one namespace ("": all). Leaders
	// are balanced per namespace, as BLD's record is.
	Namespace string
	// AckWait is how long a pinged candidate has to answer before it
	// counts as gone.
	AckWait time.Duration
	// Gather is how long a new application's first election waits for
	// candidates whose Pods are bound to emptier nodes to register (0:
	// 2 s). Its candidates start one by one — on kind, seconds apart —
	// and the first to register would otherwise be named wherever it is.
	Gather time.Duration
	// Resync bounds the time between two looks at the elections.
	Resync time.Duration
	Log    *slog.Logger
	Clock  clock.Clock
	// OnDecision, when set, sees every write the controller made.
	OnDecision func(ns string, d strategy.Decision)
}

// Controller names holders for the strategy's Leases.
type Controller struct {
	cfg        Config
	leases     cache.Indexer
	own        written // the controller's writes the informer has not caught up with
	candidates cache.Indexer
	pods       cache.Indexer // candidate Pods (bld.ElectionLabel), by election
	wake       chan struct{}
	warned     map[string]bool // candidates and Pods already reported (unusable, or annotated with another node than their Pod's)
	// When this replica first saw each absent election ("ns/name"): its
	// wait for a Pod on the emptiest node runs from then.
	absentSince map[string]time.Time
}

// New checks cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil {
		return nil, errors.New("cle: a client is required")
	}
	if cfg.AckWait <= 0 {
		return nil, fmt.Errorf("cle: ack wait %s: want > 0", cfg.AckWait)
	}
	if cfg.Gather < 0 {
		return nil, fmt.Errorf("cle: gather %s: want ≥ 0", cfg.Gather)
	}
	if cfg.Gather == 0 {
		cfg.Gather = 2 * time.Second
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.OnDecision == nil {
		cfg.OnDecision = func(string, strategy.Decision) {}
	}
	return &Controller{cfg: cfg, wake: make(chan struct{}, 1), warned: map[string]bool{}, absentSince: map[string]time.Time{}}, nil
}

// Run controls the elections until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	f := informers.NewSharedInformerFactoryWithOptions(c.cfg.Client, 0, informers.WithNamespace(c.cfg.Namespace))
	li := f.Coordination().V1().Leases().Informer()
	ci := f.Coordination().V1alpha2().LeaseCandidates().Informer()
	// Only the candidates' Pods, the ones labelled with their election.
	pf := informers.NewSharedInformerFactoryWithOptions(c.cfg.Client, 0, informers.WithNamespace(c.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = bld.ElectionLabel }))
	pi := pf.Core().V1().Pods().Informer()
	if err := pi.AddIndexers(cache.Indexers{byElection: electionOf}); err != nil {
		return err
	}
	poke := func(any) { c.poke() }
	h := cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke}
	if _, err := li.AddEventHandler(h); err != nil {
		return err
	}
	if _, err := ci.AddEventHandler(h); err != nil {
		return err
	}
	// A Pod matters when it appears, is bound, or goes: not at each of
	// its status updates.
	ph := cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(o, n any) {
		if placementChanged(o, n) {
			poke(n)
		}
	}, DeleteFunc: poke}
	if _, err := pi.AddEventHandler(ph); err != nil {
		return err
	}
	c.leases, c.candidates, c.pods = li.GetIndexer(), ci.GetIndexer(), pi.GetIndexer()
	f.Start(ctx.Done())
	pf.Start(ctx.Done())
	defer f.Shutdown()
	defer pf.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), li.HasSynced, ci.HasSynced, pi.HasSynced) {
		return ctx.Err()
	}
	c.cfg.Log.Info("controlling", "strategy", strategy.Name, "namespace", c.cfg.Namespace)
	for {
		next := c.reconcile(ctx)
		t := c.cfg.Clock.NewTimer(max(time.Millisecond, min(next.Sub(c.cfg.Clock.Now()), c.cfg.Resync)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-c.wake:
		case <-t.C():
		}
		t.Stop()
	}
}

func (c *Controller) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// election is one Lease of the strategy with its candidates as read.
type election struct {
	lease      *coordinationv1.Lease
	candidates []*v1alpha2.LeaseCandidate
	// An absent election's: its Lease is a template to create, and its
	// candidates are these Pods.
	pods []*v1.Pod
}

// reconcile looks at every election once: pings, then decisions. It
// returns when it wants to look again (a Lease running out, an answer
// due, a move allowed).
func (c *Controller) reconcile(ctx context.Context) time.Time {
	now := c.cfg.Clock.Now()
	next := now.Add(c.cfg.Resync)
	soon := func(t time.Time) {
		if t.After(now) && t.Before(next) {
			next = t
		}
	}
	byNS := c.elections()
	namespaces := make([]string, 0, len(byNS))
	for ns := range byNS {
		namespaces = append(namespaces, ns)
	}
	slices.Sort(namespaces)
	var pings []*v1alpha2.LeaseCandidate
	es := map[string][]strategy.Election{}
	absentSince := map[string]time.Time{}
	for _, ns := range namespaces {
		for name, el := range byNS[ns] {
			if el.pods != nil {
				key := ns + "/" + name
				absentSince[key] = cmp.Or(c.absentSince[key], now)
				es[ns] = append(es[ns], c.absentElection(absentSince[key], name, el, soon))
				continue
			}
			e, ask := c.election(now, name, el, soon)
			es[ns] = append(es[ns], e)
			pings = append(pings, ask...)
		}
	}
	c.absentSince = absentSince
	c.ping(ctx, pings, now)
	var writes []write
	for _, ns := range namespaces {
		for _, d := range strategy.Decide(now, es[ns]) {
			el := byNS[ns][d.Election]
			writes = append(writes, write{lease: el.lease, d: d, create: el.pods != nil})
		}
	}
	c.writeAll(ctx, now, writes)
	for _, w := range writes {
		if w.err != nil {
			// A conflict is a newer state than the cache's (a renewal,
			// the controller's own last write), as is a Lease created
			// since (by a candidate): look again soon.
			lvl := slog.LevelWarn
			if apierrors.IsConflict(w.err) || apierrors.IsAlreadyExists(w.err) {
				lvl = slog.LevelDebug
			}
			c.cfg.Log.Log(ctx, lvl, "writing a decision", "namespace", w.lease.Namespace, "lease", w.d.Election, "err", w.err)
			soon(now.Add(c.cfg.AckWait / 4))
			continue
		}
		c.cfg.OnDecision(w.lease.Namespace, w.d)
	}
	return next
}

// elections groups the strategy's candidates by namespace and Lease,
// with the Lease where it exists and is the strategy's.
func (c *Controller) elections() map[string]map[string]*election {
	out := map[string]map[string]*election{}
	seen := map[string]bool{}
	for _, obj := range c.candidates.List() {
		lc, ok := obj.(*v1alpha2.LeaseCandidate)
		if !ok || lc.Spec.Strategy != strategy.Name {
			continue
		}
		if out[lc.Namespace] == nil {
			out[lc.Namespace] = map[string]*election{}
		}
		el := out[lc.Namespace][lc.Spec.LeaseName]
		if el == nil {
			el = &election{}
			key := lc.Namespace + "/" + lc.Spec.LeaseName
			if l, ok := c.lease(key); ok && l.Spec.Strategy != nil && *l.Spec.Strategy == strategy.Name {
				el.lease = l
				seen[key] = true
			}
			out[lc.Namespace][lc.Spec.LeaseName] = el
		}
		el.candidates = append(el.candidates, lc)
	}
	for ns, els := range out {
		for name, el := range els {
			if el.lease == nil { // its candidates create it (bld.Candidate)
				delete(els, name)
			}
		}
		if len(els) == 0 {
			delete(out, ns)
		}
	}
	c.absent(out, seen)
	c.own.keep(seen)
	return out
}

// lease is the Lease key as the controller knows it: the informer's copy
// or the controller's own newer write.
func (c *Controller) lease(key string) (*coordinationv1.Lease, bool) {
	if obj, exists, _ := c.leases.GetByKey(key); exists {
		if l, ok := obj.(*coordinationv1.Lease); ok {
			return c.own.over(l), true
		}
	}
	return c.own.get(key)
}

// election reads one Lease and its candidates for the strategy, and
// returns the candidates of a free Lease to ask (those that have not
// answered since it went free). A candidate without a usable node is
// left out, once reported.
func (c *Controller) election(now time.Time, name string, el *election, soon func(time.Time)) (e strategy.Election, ask []*v1alpha2.LeaseCandidate) {
	spec := el.lease.Spec
	e = strategy.Election{Name: name, LeaseDuration: max(time.Second, leaseDuration(el.lease))}
	if spec.HolderIdentity != nil {
		e.Holder = *spec.HolderIdentity
	}
	if spec.RenewTime != nil {
		e.RenewTime = spec.RenewTime.Time
	} else {
		e.RenewTime = el.lease.CreationTimestamp.Time
	}
	if spec.PreferredHolder != nil {
		e.Preferred = *spec.PreferredHolder
	}
	if t, err := time.Parse(time.RFC3339Nano, el.lease.Annotations[MovedAtAnnotation]); err == nil {
		e.LastMove = t
		soon(t.Add(e.LeaseDuration))
	}
	free := e.Free(now)
	var since time.Time
	if free {
		since = e.FreeSince()
		e.Gather = since.Add(c.cfg.AckWait)
		soon(e.Gather)
	} else {
		soon(e.RenewTime.Add(e.LeaseDuration))
	}
	for _, lc := range el.candidates {
		node := c.candidateNode(lc)
		if errs := validation.IsDNS1123Subdomain(node); len(errs) > 0 {
			if key := lc.Namespace + "/" + lc.Name; !c.warned[key] {
				c.warned[key] = true
				c.cfg.Log.Warn("candidate left out: its node annotation is unusable", "candidate", key, "annotation", bld.NodeAnnotation, "problem", errs[0])
			}
			continue
		}
		// The holder of a free Lease gave it up or failed to renew it.
		if free && lc.Name == e.Holder {
			continue
		}
		var renew, ping time.Time
		if lc.Spec.RenewTime != nil {
			renew = lc.Spec.RenewTime.Time
		}
		if lc.Spec.PingTime != nil {
			ping = lc.Spec.PingTime.Time
		}
		cand := strategy.Candidate{Identity: lc.Name, Node: node, Leaving: c.podLeaving(lc)}
		switch strategy.Liveness(now, since, renew, ping, c.cfg.AckWait) {
		case strategy.Dead:
			continue
		case strategy.Unasked:
			ask = append(ask, lc)
			soon(now.Add(c.cfg.AckWait))
			cand.Pending = true
		case strategy.Pending:
			soon(ping.Add(c.cfg.AckWait))
			cand.Pending = true
		}
		e.Candidates = append(e.Candidates, cand)
	}
	if !free {
		// The Pods whose candidates have not registered: a holder named
		// from the Pods counts at its Pod's node, and the others tell
		// where candidates are on their way. Without them a node that so
		// far hosts only such Pods is unknown, and a new application
		// would settle for a fuller node than it at once (seen under
		// load: three applications' first Pods on two nodes, the third
		// node's still to register, the third application named beside
		// the second's leader, a move to undo).
		e.Candidates = append(e.Candidates, c.unregistered(el)...)
	}
	if free && el.lease.Spec.AcquireTime == nil {
		if exp := c.expected(now, since, el); len(exp) > 0 {
			e.Candidates = append(e.Candidates, exp...)
			soon(since.Add(c.cfg.Gather))
		}
	}
	return e, ask
}

func leaseDuration(l *coordinationv1.Lease) time.Duration {
	if l.Spec.LeaseDurationSeconds == nil {
		return 0
	}
	return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
}

// inFlight bounds the pings and the writes in flight: a controller
// taking over, or one watching many stopped applications, may have
// hundreds to send.
const inFlight = 16

// ping asks candidates to renew (client-go's candidate does when its
// pingTime passes its renewTime), several at once.
func (c *Controller) ping(ctx context.Context, lcs []*v1alpha2.LeaseCandidate, now time.Time) {
	var g errgroup.Group
	g.SetLimit(inFlight)
	for _, lc := range lcs {
		g.Go(func() error {
			cp := lc.DeepCopy()
			cp.Spec.PingTime = &metav1.MicroTime{Time: now}
			_, err := c.cfg.Client.CoordinationV1alpha2().LeaseCandidates(cp.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
			// A conflict or a 404: it changed or left, the next look sees it.
			if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				c.cfg.Log.Warn("pinging a candidate", "candidate", cp.Namespace+"/"+cp.Name, "err", err)
			}
			return nil
		})
	}
	g.Wait()
}

// write is one decision to apply to a Lease as read, and how it went.
type write struct {
	lease  *coordinationv1.Lease
	d      strategy.Decision
	create bool // an absent election's Lease, named from its Pods
	err    error
}

// writeAll applies the decisions side by side: each is to another Lease,
// and in one after the other every application waited for the writes
// of those decided before it (seven at once, as kube-election-latency
// starts them, waited for up to six round trips).
func (c *Controller) writeAll(ctx context.Context, now time.Time, ws []write) {
	var g errgroup.Group
	g.SetLimit(inFlight)
	for i := range ws {
		g.Go(func() error {
			var l *coordinationv1.Lease
			if l, ws[i].err = c.write(ctx, now, ws[i]); ws[i].err == nil {
				c.own.note(l)
			}
			return nil
		})
	}
	g.Wait()
}

// write applies a decision to the Lease as read, refused by the API
// server if the Lease changed since (or, for an absent election, was
// created since).
func (c *Controller) write(ctx context.Context, now time.Time, w write) (*coordinationv1.Lease, error) {
	l, d := w.lease, w.d
	cp := l.DeepCopy()
	t := metav1.NewMicroTime(now)
	if d.Holder != "" {
		transitions := int32(1)
		if cp.Spec.LeaseTransitions != nil {
			transitions = *cp.Spec.LeaseTransitions + 1
		}
		cp.Spec.HolderIdentity, cp.Spec.PreferredHolder = &d.Holder, nil
		cp.Spec.AcquireTime, cp.Spec.RenewTime, cp.Spec.LeaseTransitions = &t, &t, &transitions
		if cp.Spec.LeaseDurationSeconds == nil || *cp.Spec.LeaseDurationSeconds < 1 {
			one := int32(1)
			cp.Spec.LeaseDurationSeconds = &one
		}
	} else {
		cp.Spec.PreferredHolder = &d.Preferred
		if cp.Annotations == nil {
			cp.Annotations = map[string]string{}
		}
		cp.Annotations[MovedAtAnnotation] = now.UTC().Format(time.RFC3339Nano)
	}
	if w.create {
		return c.cfg.Client.CoordinationV1().Leases(l.Namespace).Create(ctx, cp, metav1.CreateOptions{})
	}
	return c.cfg.Client.CoordinationV1().Leases(l.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
}
