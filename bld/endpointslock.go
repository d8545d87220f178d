package bld

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderAnnotation is where the 2016-era lock kept its record, as the
// papers' clusters did; client-go has since removed that lock.
const LeaderAnnotation = "control-plane.alpha.kubernetes.io/leader"

// EndpointsLock is a resourcelock.Interface that stores the election
// record as a JSON annotation on an Endpoints object. Update is a
// compare-and-swap on the resourceVersion read or written last, which an
// annotation it writes itself (Annotate) moves along.
type EndpointsLock struct {
	EndpointsMeta metav1.ObjectMeta
	Client        corev1client.EndpointsGetter
	LockConfig    resourcelock.ResourceLockConfig

	mu sync.Mutex // guards e: ranked succession annotates beside the elector
	e  *v1.Endpoints
}

var _ resourcelock.Interface = (*EndpointsLock)(nil)

// Get returns the record and its raw JSON.
func (l *EndpointsLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	e, err := l.Client.Endpoints(l.EndpointsMeta.Namespace).Get(ctx, l.EndpointsMeta.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	l.set(e)
	raw, ok := e.Annotations[LeaderAnnotation]
	if !ok {
		return &resourcelock.LeaderElectionRecord{}, nil, nil
	}
	rec, err := decodeLockRecord(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("endpoints %s/%s: annotation %s: %w", e.Namespace, e.Name, LeaderAnnotation, err)
	}
	return &rec, []byte(raw), nil
}

// decodeLockRecord reads the annotation's record, which anyone allowed to
// edit the Endpoints object writes: a holder is a Pod name (a DNS
// subdomain, 253 bytes at most) or none, and the counts are not negative.
func decodeLockRecord(raw string) (resourcelock.LeaderElectionRecord, error) {
	var rec resourcelock.LeaderElectionRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return rec, err
	}
	switch {
	case len(rec.HolderIdentity) > 253:
		return rec, fmt.Errorf("holderIdentity of %d bytes: a Pod name has at most 253", len(rec.HolderIdentity))
	case rec.LeaseDurationSeconds < 0:
		return rec, fmt.Errorf("leaseDurationSeconds %d: negative", rec.LeaseDurationSeconds)
	case rec.LeaderTransitions < 0:
		return rec, fmt.Errorf("leaderTransitions %d: negative", rec.LeaderTransitions)
	}
	return rec, nil
}

// Create creates the Endpoints object holding rec.
func (l *EndpointsLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	e, err := l.Client.Endpoints(l.EndpointsMeta.Namespace).Create(ctx, &v1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{
			Name: l.EndpointsMeta.Name, Namespace: l.EndpointsMeta.Namespace, Labels: l.EndpointsMeta.Labels,
			Annotations: map[string]string{LeaderAnnotation: string(raw)},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	l.set(e)
	return nil
}

func (l *EndpointsLock) set(e *v1.Endpoints) {
	l.mu.Lock()
	l.e = e
	l.mu.Unlock()
}

func (l *EndpointsLock) last() *v1.Endpoints {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.e
}

// Update replaces the record, failing on a concurrent change.
func (l *EndpointsLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	last := l.last()
	if last == nil {
		return errors.New("endpoints lock not initialized: call Get or Create first")
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	e := last.DeepCopy()
	if e.Annotations == nil {
		e.Annotations = map[string]string{}
	}
	e.Annotations[LeaderAnnotation] = string(raw)
	e, err = l.Client.Endpoints(l.EndpointsMeta.Namespace).Update(ctx, e, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	l.set(e)
	return nil
}

// RecordEvent records an event when a recorder is configured.
func (l *EndpointsLock) RecordEvent(s string) {
	e := l.last()
	if l.LockConfig.EventRecorder == nil || e == nil {
		return
	}
	l.LockConfig.EventRecorder.Eventf(e, v1.EventTypeNormal, "LeaderElection", "%s %s", l.LockConfig.Identity, s)
}

// Describe names the lock.
func (l *EndpointsLock) Describe() string {
	return l.EndpointsMeta.Namespace + "/" + l.EndpointsMeta.Name
}

// Identity is the candidate's identity.
func (l *EndpointsLock) Identity() string { return l.LockConfig.Identity }
