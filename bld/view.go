package bld

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/ringside/ringside/bld/balance"
	"github.com/ringside/ringside/bld/strategy"
)

// bld-optimistic's picture of its namespace, kept by two watches: the
// Leases (each naming its holder's node, LeaderNodeAnnotation) and the
// candidate Pods of every election.
//
// BLD reserves a node in one shared record before it takes the lease, so
// every application's election pays a compare-and-swap more than the
// default election's, and a burst of elections queues on that one object.
// bld-optimistic takes its own Lease first and then validates in the
// order the API server committed the writes: a watch delivers events in
// that order, so the Leases as they stood just before this candidate's
// write came in are exactly the elections that went before it, and BLD's
// condition on them is the check a serialised reservation would have
// made. The winner waits only for its own write's event. To keep a burst
// of applications from landing on the same node (and one of them having
// to free its Lease and try again), every candidate computes the same
// choice from what it sees — the cle-balanced strategy's rule
// (strategy.Decide) over every election's candidates — and only the
// chosen candidate tries at once; the others wait a grace for it, then
// any candidate that qualifies may try.

// maxVerdicts bounds the placements kept for writes of this candidate
// whose validation may still ask for them.
const maxVerdicts = 8

// leaseView is one Lease as the watch delivered it.
type leaseView struct {
	holder, node string
	renew        time.Time
	duration     time.Duration
}

// held reports whether the Lease names a holder whose term runs at now.
func (l leaseView) held(now time.Time) bool {
	return l.holder != "" && now.Before(l.renew.Add(l.duration))
}

// podView is one candidate Pod as the watch delivered it.
type podView struct{ election, node string }

// view is a candidate's picture of its namespace. Its handlers run in the
// watches' order; the methods are safe for concurrent use.
type view struct {
	election, identity, node string
	clock                    clock.Clock
	kick                     func() // a waiting candidate should look again

	mu       sync.Mutex
	leases   map[string]leaseView
	pods     map[string]podView           // live candidate Pods by name
	at       map[string]balance.Placement // the others' placement just before each write of ours landed
	atOrder  []string
	arrived  chan struct{} // closed, and replaced, whenever at grows
	freeFrom time.Time     // since when this election's Lease has been seen free (zero: held)
	kickAt   time.Time     // when a kick is due for the grace's end (zero: none)
	synced   func() bool
}

func newView(election, identity, node string, clk clock.Clock, kick func()) *view {
	return &view{election: election, identity: identity, node: node, clock: clk, kick: kick,
		leases: map[string]leaseView{}, pods: map[string]podView{}, at: map[string]balance.Placement{},
		arrived: make(chan struct{}), synced: func() bool { return false }}
}

// start watches the namespace's Leases and candidate Pods until ctx ends.
// A reflector feeds each straight into the view, in its own goroutine:
// an informer's queue and handler hops added tens of milliseconds to the
// first list on a loaded machine, and the first list is the election's
// first read.
func (v *view) start(ctx context.Context, client kubernetes.Interface, namespace string) {
	leases := client.CoordinationV1().Leases(namespace)
	ls := &viewStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), apply: v.lease}
	lr := cache.NewReflectorWithOptions(&cache.ListWatch{
		ListFunc:  func(o metav1.ListOptions) (runtime.Object, error) { return leases.List(ctx, o) },
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { return leases.Watch(ctx, o) },
	}, &coordinationv1.Lease{}, ls, cache.ReflectorOptions{Name: "bld-optimistic leases"})
	pods := client.CoreV1().Pods(namespace)
	onlyCandidates := func(o *metav1.ListOptions) { o.LabelSelector = ElectionLabel }
	ps := &viewStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), apply: v.pod}
	pr := cache.NewReflectorWithOptions(&cache.ListWatch{
		ListFunc:  func(o metav1.ListOptions) (runtime.Object, error) { onlyCandidates(&o); return pods.List(ctx, o) },
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { onlyCandidates(&o); return pods.Watch(ctx, o) },
	}, &v1.Pod{}, ps, cache.ReflectorOptions{Name: "bld-optimistic pods"})
	v.mu.Lock()
	v.synced = func() bool { return ls.synced.Load() && ps.synced.Load() }
	v.mu.Unlock()
	go lr.Run(ctx.Done())
	go pr.Run(ctx.Done())
}

// viewStore is a reflector's store that hands every change to the view
// as it comes, in the watch's order.
type viewStore struct {
	cache.Store
	apply  func(obj any, deleted bool)
	synced atomic.Bool // a first list has been applied
}

func (s *viewStore) Add(obj any) error {
	s.apply(obj, false)
	return s.Store.Add(obj)
}

func (s *viewStore) Update(obj any) error {
	s.apply(obj, false)
	return s.Store.Update(obj)
}

func (s *viewStore) Delete(obj any) error {
	s.apply(obj, true)
	return s.Store.Delete(obj)
}

// Replace applies a list: what it no longer holds is deleted.
func (s *viewStore) Replace(objs []any, rv string) error {
	keep := map[string]bool{}
	for _, o := range objs {
		if k, err := cache.MetaNamespaceKeyFunc(o); err == nil {
			keep[k] = true
		}
	}
	for _, old := range s.Store.List() {
		if k, err := cache.MetaNamespaceKeyFunc(old); err == nil && !keep[k] {
			s.apply(old, true)
		}
	}
	for _, o := range objs {
		s.apply(o, false)
	}
	err := s.Store.Replace(objs, rv)
	s.synced.Store(true)
	return err
}

// syncPoll is how often waitSynced looks. (client-go's WaitForCacheSync
// looks every 100 ms, most of which it would add to every election.)
const syncPoll = time.Millisecond

// waitSynced blocks until both watches have delivered their first list:
// the candidate's first read of the election, in place of the lock's.
func (v *view) waitSynced(ctx context.Context) {
	v.mu.Lock()
	synced := v.synced
	v.mu.Unlock()
	_ = wait.PollUntilContextCancel(ctx, syncPoll, true, func(context.Context) (bool, error) { return synced(), nil })
}

func (v *view) lease(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	now := v.clock.Now()
	v.mu.Lock()
	if !deleted && l.Name == v.election && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == v.identity {
		// One of this candidate's writes: what went before it is fixed now.
		v.at[l.ResourceVersion] = v.placementLocked(now)
		v.atOrder = append(v.atOrder, l.ResourceVersion)
		if len(v.atOrder) > maxVerdicts {
			delete(v.at, v.atOrder[0])
			v.atOrder = v.atOrder[1:]
		}
		close(v.arrived)
		v.arrived = make(chan struct{})
	}
	lv := leaseView{}
	if deleted {
		delete(v.leases, l.Name)
	} else {
		lv = leaseOf(l)
		v.leases[l.Name] = lv
	}
	kick := false
	if l.Name == v.election {
		switch {
		case lv.held(now):
			v.freeFrom = time.Time{}
		case v.freeFrom.IsZero():
			v.freeFrom, kick = now, true
		}
	}
	v.mu.Unlock()
	if kick {
		v.kick()
	}
}

// leaseOf reads what the view keeps of a Lease.
func leaseOf(l *coordinationv1.Lease) leaseView {
	lv := leaseView{node: l.Annotations[LeaderNodeAnnotation]}
	if l.Spec.HolderIdentity != nil {
		lv.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil {
		lv.renew = l.Spec.RenewTime.Time
	}
	if l.Spec.LeaseDurationSeconds != nil {
		lv.duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return lv
}

func (v *view) pod(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	p, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if deleted || p.DeletionTimestamp != nil || p.Spec.NodeName == "" || p.Labels[ElectionLabel] == "" {
		delete(v.pods, p.Name)
		return
	}
	v.pods[p.Name] = podView{election: p.Labels[ElectionLabel], node: p.Spec.NodeName}
}

// placementLocked is where the other elections' leaders are at now: each
// held Lease that names its holder's node.
func (v *view) placementLocked(now time.Time) balance.Placement {
	p := balance.Placement{}
	for name, l := range v.leases {
		if name != v.election && l.node != "" && l.held(now) {
			p[name] = l.node
		}
	}
	return p
}

// placement is the other elections' leaders now.
func (v *view) placement() balance.Placement {
	now := v.clock.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.placementLocked(now)
}

// unclaimed reports whether this election's Lease does not exist.
func (v *view) unclaimed() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.leases[v.election]
	return !ok
}

// placementAt waits until the watch delivers the write of ours with
// resourceVersion rv and returns the other elections' leaders as they
// stood just before it.
func (v *view) placementAt(ctx context.Context, rv string, timeout time.Duration) (balance.Placement, error) {
	if rv == "" {
		return nil, fmt.Errorf("validating %s: no write to look for", v.election)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		v.mu.Lock()
		p, ok := v.at[rv]
		arrived := v.arrived
		v.mu.Unlock()
		if ok {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("validating %s: the watch did not deliver our write (resourceVersion %s): %w", v.election, rv, ctx.Err())
		case <-arrived:
		}
	}
}

// turn reports whether this candidate may try for its election now: the
// Lease is free and either the shared choice falls on this candidate's
// node (any candidate there may take it: the first to get there, as in the
// default election), or it has been free for grace (the chosen node's
// candidates may be gone, or see otherwise).
func (v *view) turn(grace time.Duration) bool {
	now := v.clock.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	own, ok := v.leases[v.election]
	if ok && own.held(now) {
		return false
	}
	if v.freeFrom.IsZero() { // absent since the first list, or run out unseen
		v.freeFrom = now
	}
	from := v.freeFrom
	if end := own.renew.Add(own.duration); ok && own.holder != "" && end.Before(from) {
		from = end
	}
	if now.Sub(from) >= grace {
		return true
	}
	if v.chosenLocked(now).Node == v.node {
		return true
	}
	// Look again the moment the grace ends, not at the refusals' backoff,
	// which may run to a retry period by then.
	if end := from.Add(grace); !v.kickAt.Equal(end) {
		v.kickAt = end
		go func() { <-v.clock.After(end.Sub(now)); v.kick() }()
	}
	return false
}

// chosenLocked is the candidate that strategy.Decide names for this
// election given every election's candidate Pods and Leases as seen: the
// same for every candidate that sees the same, so a burst of elections
// spreads over the nodes without any write. This candidate counts as a
// candidate even before its Pod shows.
func (v *view) chosenLocked(now time.Time) strategy.Candidate {
	byElection := map[string][]strategy.Candidate{}
	add := func(election, id, node string) {
		if !slices.ContainsFunc(byElection[election], func(c strategy.Candidate) bool { return c.Identity == id }) {
			byElection[election] = append(byElection[election], strategy.Candidate{Identity: id, Node: node})
		}
	}
	for name, p := range v.pods {
		add(p.election, name, p.node)
	}
	add(v.election, v.identity, v.node)
	for name, l := range v.leases {
		if l.held(now) && l.node != "" {
			add(name, l.holder, l.node) // a leader counts where it is, its Pod seen or not
		}
	}
	var es []strategy.Election
	for _, name := range slices.Sorted(maps.Keys(byElection)) {
		e := strategy.Election{Name: name, Candidates: byElection[name]}
		if l, ok := v.leases[name]; ok {
			e.Holder, e.RenewTime, e.LeaseDuration = l.holder, l.renew, l.duration
			if !l.held(now) {
				// A holder that let its term run out is gone.
				e.Candidates = slices.DeleteFunc(e.Candidates, func(c strategy.Candidate) bool { return c.Identity == l.holder })
			}
		}
		es = append(es, e)
	}
	for _, d := range strategy.Decide(now, es) {
		if d.Election == v.election && d.Holder != "" {
			i := slices.IndexFunc(byElection[v.election], func(c strategy.Candidate) bool { return c.Identity == d.Holder })
			return byElection[v.election][i]
		}
	}
	return strategy.Candidate{}
}
