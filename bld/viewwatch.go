package bld

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// The watch that keeps a view: a reflector whose store hands every change
// to the view in the watch's order, and a list in commit order.

// asLease is a watched object as a Lease, and whether it was a deletion
// the watch missed (a tombstone).
func asLease(obj any) (l *coordinationv1.Lease, tombstone, ok bool) {
	if d, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
		obj, tombstone = d.Obj, true
	}
	l, ok = obj.(*coordinationv1.Lease)
	return l, tombstone, ok
}

// start watches the namespace's Leases until ctx ends. A reflector feeds
// them straight into the view, in its own goroutine: an informer's queue
// and handler hops added tens of milliseconds to the first list on a
// loaded machine, and the first list is the election's first read. A
// list then a watch, not a streaming watch's initial events (one request
// fewer): on the API server (1.32) those took longer with every Lease in
// other namespaces, and kube-election-latency's elections with it (see
// docs/bld-optimistic.md); the list, at resourceVersion 0 from the watch
// cache, did not.
func (v *view) start(ctx context.Context, client kubernetes.Interface, namespace string) {
	leases := client.CoordinationV1().Leases(namespace)
	ls := &viewStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), v: v, done: ctx.Done()}
	lr := cache.NewReflectorWithOptions(&cache.ListWatch{
		ListFunc:  func(o metav1.ListOptions) (runtime.Object, error) { return leases.List(ctx, o) },
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { return leases.Watch(ctx, o) },
	}, &coordinationv1.Lease{}, ls, cache.ReflectorOptions{Name: "bld-optimistic leases"})
	go lr.Run(ctx.Done())
}

// viewStore is a reflector's store that hands every change to the view
// as it comes, in the watch's order.
type viewStore struct {
	cache.Store
	v      *view
	done   <-chan struct{}
	synced sync.Once
}

// apply hands a change to the view, first waiting for N when judging it
// needs N; without N (the watch is ending) it is not applied.
func (s *viewStore) apply(obj any, deleted bool) {
	if !deleted && s.v.needed(obj) {
		select {
		case <-s.v.ready:
		case <-s.done:
			return
		}
	}
	s.v.lease(obj, deleted)
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

// Replace applies a list: what it no longer holds is deleted. A list
// has no commit order; its Leases are judged in the order their holders'
// acquisitions were committed (acquiredRevision), as a watch would have
// delivered them.
func (s *viewStore) Replace(objs []any, rv string) error {
	objs = slices.Clone(objs)
	slices.SortStableFunc(objs, func(a, b any) int { return cmp.Compare(acquiredRevision(a), acquiredRevision(b)) })
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
	s.synced.Do(func() { close(s.v.synced) })
	return err
}

// acquiredRevision is the revision that committed a listed Lease's
// holder's acquisition: the one its holder names on renewal
// (AcquiredAnnotation), or, before its first renewal, the Lease's own
// resourceVersion. 0, judged first, for a Lease without a holder and for
// one whose revision is not a number (not the API server's).
func acquiredRevision(obj any) uint64 {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return 0
	}
	rv := l.ResourceVersion
	if who, at, ok := strings.Cut(l.Annotations[AcquiredAnnotation], "@"); ok && who == *l.Spec.HolderIdentity {
		rv = at
	}
	n, _ := strconv.ParseUint(rv, 10, 64)
	return n
}
