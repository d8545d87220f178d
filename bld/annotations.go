package bld

import (
	"context"
	"encoding/json"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// annotatedLock is a lock whose object also carries annotations beside the
// election record — where ranked succession keeps its ranking. Both locks
// implement it: the Lease and the papers' Endpoints.
type annotatedLock interface {
	resourcelock.Interface
	// Annotations reads the lock object's annotations; nil, with no
	// error, while the object does not exist.
	Annotations(ctx context.Context) (map[string]string, error)
	// Annotate merges ann into the lock object's annotations.
	Annotate(ctx context.Context, ann map[string]string) error
}

// leaseLock is client-go's LeaseLock with annotations.
type leaseLock struct{ *resourcelock.LeaseLock }

func (l leaseLock) Annotations(ctx context.Context) (map[string]string, error) {
	lease, err := l.Client.Leases(l.LeaseMeta.Namespace).Get(ctx, l.LeaseMeta.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return lease.Annotations, nil
}

func (l leaseLock) Annotate(ctx context.Context, ann map[string]string) error {
	_, err := l.Client.Leases(l.LeaseMeta.Namespace).Patch(ctx, l.LeaseMeta.Name, types.MergePatchType, annotationPatch(ann), metav1.PatchOptions{})
	return err
}

// Annotations reads the Endpoints object's annotations.
func (l *EndpointsLock) Annotations(ctx context.Context) (map[string]string, error) {
	ep, err := l.Client.Endpoints(l.EndpointsMeta.Namespace).Get(ctx, l.EndpointsMeta.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ep.Annotations, nil
}

// Annotate merges ann into the Endpoints object's annotations. When the
// patched object still holds the record last read or written here, it
// becomes the next compare-and-swap's base (see trackedLeaseLock).
func (l *EndpointsLock) Annotate(ctx context.Context, ann map[string]string) error {
	e, err := l.Client.Endpoints(l.EndpointsMeta.Namespace).Patch(ctx, l.EndpointsMeta.Name, types.MergePatchType, annotationPatch(ann), metav1.PatchOptions{})
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.e != nil && l.e.Annotations[LeaderAnnotation] == e.Annotations[LeaderAnnotation] {
		l.e = e
	}
	return nil
}

func annotationPatch(ann map[string]string) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}}) // strings only: cannot fail
	return b
}

// LockAnnotations reads the annotations of election's lock object in ns
// (lock: LockLease or LockEndpoints) — where a ranked leader keeps its
// ranking (RankingOf); nil, with no error, while the object does not exist.
func LockAnnotations(ctx context.Context, cs kubernetes.Interface, lock, ns, election string) (map[string]string, error) {
	meta := metav1.ObjectMeta{Name: election, Namespace: ns}
	if lock == LockEndpoints {
		return (&EndpointsLock{EndpointsMeta: meta, Client: cs.CoreV1()}).Annotations(ctx)
	}
	return leaseLock{&resourcelock.LeaseLock{LeaseMeta: meta, Client: cs.CoordinationV1()}}.Annotations(ctx)
}
