package bld

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderNodeAnnotation on a Lease that bld-optimistic writes: the node
// of the candidate that wrote it. The namespace's Leases, each naming its
// holder's node, are bld-optimistic's leader-management record — one
// entry per application, each changed only by a compare-and-swap on its
// own Lease, so elections of different applications never contend.
const LeaderNodeAnnotation = "ringside.io/leader-node"

// AcquiredAnnotation on a Lease that bld-optimistic renews: its holder
// and the resourceVersion of the write that made it the holder,
// "identity@revision". A watch delivers acquisitions in commit order, but
// a list has none; a renewal moves the Lease's resourceVersion past the
// acquisitions committed after its holder's, and acquireTime is each
// writer's own clock at the start of its try (on processes a list sorted
// by it judged two acquisitions in the opposite order from the watch,
// and a repetition ended 3:1:1). With it, a list is judged in the order
// the acquisitions were committed.
const AcquiredAnnotation = "ringside.io/acquired"

// trackedLeaseLock is a Lease lock of ringside's own. It keeps the Lease
// as last read or written — the base of its next compare-and-swap — and
// moves it along through the annotations it writes itself (ranked
// succession's ranking): with client-go's LeaseLock every such write left
// the next write of the record made without a read first — the ranked
// leader's hand-over — to fail on a stale resourceVersion, read the Lease
// and write again. With a node (bld-optimistic) it writes that node
// beside every record and remembers the resourceVersion of its last write,
// so that the candidate can find that write in the order of the watch.
type trackedLeaseLock struct {
	meta     metav1.ObjectMeta
	client   coordinationv1client.LeasesGetter
	identity string
	node     string // "": none written

	mu       sync.Mutex
	lease    *coordinationv1.Lease // as last read or written
	written  string                // resourceVersion of the last write of the record
	acquired string                // resourceVersion of the write that made this lock the holder
}

func (l *trackedLeaseLock) leases() coordinationv1client.LeaseInterface {
	return l.client.Leases(l.meta.Namespace)
}

func (l *trackedLeaseLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
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

func (l *trackedLeaseLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	lease, err := l.leases().Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.meta.Name, Namespace: l.meta.Namespace, Annotations: l.nodeAnnotation(nil)},
		Spec:       resourcelock.LeaderElectionRecordToLeaseSpec(&rec),
	}, metav1.CreateOptions{})
	l.wrote(lease, err, true)
	return err
}

func (l *trackedLeaseLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	if l.lease == nil {
		l.mu.Unlock()
		return errors.New("lease not read yet: get or create it first")
	}
	cp := l.lease.DeepCopy()
	acquired := l.acquired
	l.mu.Unlock()
	// A write that makes this lock the holder is an acquisition; one
	// while it holds is a renewal (or its release).
	acquiring := rec.HolderIdentity == l.identity && (cp.Spec.HolderIdentity == nil || *cp.Spec.HolderIdentity != l.identity)
	cp.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&rec)
	cp.Annotations = l.nodeAnnotation(cp.Annotations)
	if l.node != "" {
		delete(cp.Annotations, AcquiredAnnotation)
		if rec.HolderIdentity == l.identity && !acquiring && acquired != "" {
			cp.Annotations[AcquiredAnnotation] = l.identity + "@" + acquired
		}
	}
	lease, err := l.leases().Update(ctx, cp, metav1.UpdateOptions{})
	l.wrote(lease, err, acquiring)
	return err
}

// nodeAnnotation adds the lock's node, if it has one, to ann.
func (l *trackedLeaseLock) nodeAnnotation(ann map[string]string) map[string]string {
	if l.node == "" {
		return ann
	}
	if ann == nil {
		ann = map[string]string{}
	}
	ann[LeaderNodeAnnotation] = l.node
	return ann
}

func (l *trackedLeaseLock) wrote(lease *coordinationv1.Lease, err error, acquiring bool) {
	if err != nil {
		return
	}
	l.mu.Lock()
	l.lease, l.written = lease, lease.ResourceVersion
	if acquiring {
		l.acquired = lease.ResourceVersion
	}
	l.mu.Unlock()
}

// base is the Lease as last read or written: the next write's base.
func (l *trackedLeaseLock) base() *coordinationv1.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lease
}

// adopt makes lease, read elsewhere (bld-optimistic's watch), the next
// write's base; a write copies it first.
func (l *trackedLeaseLock) adopt(lease *coordinationv1.Lease) {
	l.mu.Lock()
	l.lease = lease
	l.mu.Unlock()
}

// lastWrite is the resourceVersion of this lock's last successful write.
func (l *trackedLeaseLock) lastWrite() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.written
}

func (l *trackedLeaseLock) RecordEvent(string) {}

func (l *trackedLeaseLock) Describe() string { return l.meta.Namespace + "/" + l.meta.Name }

func (l *trackedLeaseLock) Identity() string { return l.identity }

func (l *trackedLeaseLock) Annotations(ctx context.Context) (map[string]string, error) {
	return leaseLock{&resourcelock.LeaseLock{LeaseMeta: l.meta, Client: l.client}}.Annotations(ctx)
}

// Annotate merges ann into the Lease's annotations. When the patched Lease
// still holds the record last read or written here, nobody wrote the
// record in between, and the patched Lease becomes the next
// compare-and-swap's base; otherwise the base stays, and the next write
// fails on it as it should.
func (l *trackedLeaseLock) Annotate(ctx context.Context, ann map[string]string) error {
	lease, err := l.leases().Patch(ctx, l.meta.Name, types.MergePatchType, annotationPatch(ann), metav1.PatchOptions{})
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lease != nil && equality.Semantic.DeepEqual(l.lease.Spec, lease.Spec) {
		l.lease = lease
	}
	return nil
}
