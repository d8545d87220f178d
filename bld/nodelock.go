package bld

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderNodeAnnotation on a Lease that bld-optimistic writes: the node
// of the candidate that wrote it. The namespace's Leases, each naming its
// holder's node, are bld-optimistic's leader-management record — one
// entry per application, each changed only by a compare-and-swap on its
// own Lease, so elections of different applications never contend.
const LeaderNodeAnnotation = "ringside.io/leader-node"

// nodeLeaseLock is a Lease lock that writes its candidate's node beside
// every record and remembers the resourceVersion of its last write, so
// that the candidate can find that write in the order of the watch.
type nodeLeaseLock struct {
	meta     metav1.ObjectMeta
	client   coordinationv1client.LeasesGetter
	identity string
	node     string

	mu      sync.Mutex
	lease   *coordinationv1.Lease // as last read or written
	written string                // resourceVersion of the last write
}

func (l *nodeLeaseLock) leases() coordinationv1client.LeaseInterface {
	return l.client.Leases(l.meta.Namespace)
}

func (l *nodeLeaseLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	lease, err := l.leases().Get(ctx, l.meta.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	l.lease = lease
	l.mu.Unlock()
	return leaseRecord(lease)
}

// leaseRecord is the election record of a Lease and its encoding, which
// the elector compares to notice a change.
func leaseRecord(lease *coordinationv1.Lease) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the record of lease %s: %w", lease.Name, err)
	}
	return rec, raw, nil
}

func (l *nodeLeaseLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	lease, err := l.leases().Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.meta.Name, Namespace: l.meta.Namespace, Annotations: map[string]string{LeaderNodeAnnotation: l.node}},
		Spec:       resourcelock.LeaderElectionRecordToLeaseSpec(&rec),
	}, metav1.CreateOptions{})
	l.wrote(lease, err)
	return err
}

func (l *nodeLeaseLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	if l.lease == nil {
		l.mu.Unlock()
		return errors.New("lease not read yet: get or create it first")
	}
	cp := l.lease.DeepCopy()
	l.mu.Unlock()
	cp.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&rec)
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	cp.Annotations[LeaderNodeAnnotation] = l.node
	lease, err := l.leases().Update(ctx, cp, metav1.UpdateOptions{})
	l.wrote(lease, err)
	return err
}

func (l *nodeLeaseLock) wrote(lease *coordinationv1.Lease, err error) {
	if err != nil {
		return
	}
	l.mu.Lock()
	l.lease, l.written = lease, lease.ResourceVersion
	l.mu.Unlock()
}

// lastWrite is the resourceVersion of this lock's last successful write.
func (l *nodeLeaseLock) lastWrite() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.written
}

func (l *nodeLeaseLock) RecordEvent(string) {}

func (l *nodeLeaseLock) Describe() string { return l.meta.Namespace + "/" + l.meta.Name }

func (l *nodeLeaseLock) Identity() string { return l.identity }

func (l *nodeLeaseLock) Annotations(ctx context.Context) (map[string]string, error) {
	return leaseLock{&resourcelock.LeaseLock{LeaseMeta: l.meta, Client: l.client}}.Annotations(ctx)
}

func (l *nodeLeaseLock) Annotate(ctx context.Context, ann map[string]string) error {
	return leaseLock{&resourcelock.LeaseLock{LeaseMeta: l.meta, Client: l.client}}.Annotate(ctx, ann)
}
