package bld

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"

	"github.com/ringside/ringside/bld/balance"
)

// RecordName is the ConfigMap that holds the leader-management record.
const RecordName = "ringside-leaders"

// Entry is one application's line in the record.
type Entry struct {
	Node   string    `json:"node"`
	Holder string    `json:"holder"`
	Time   time.Time `json:"time"`
	// Expires is when the entry stops counting unless its leader
	// refreshes it (Confirm does, every lease duration): an application
	// that was SIGKILLed or deleted leaves no lasting claim on its node.
	// An entry without it (an older writer) counts until it is replaced.
	Expires time.Time `json:"expires,omitzero"`
}

// entryLife is how long an entry counts after its last refresh, in
// lease durations: a leader refreshes every lease duration, so a live one
// never lapses, and one gone for longer than this has lost its lease
// long ago.
const entryLife = 4

// MaxLease is the longest lease a candidate takes (Kubernetes' own
// components use 15 s). An entry claiming a node for longer ahead than
// entryLife such leases was not written by a candidate: it is left out,
// so a hand-edited or hostile entry (expires in the year 9999) cannot
// hold a node for ever.
const MaxLease = 10 * time.Minute

func (e Entry) expired(now time.Time) bool { return !e.Expires.IsZero() && now.After(e.Expires) }

// Record is the leader-management record (the BLD paper's LMEP): which
// node each application's leader is on. Every change is a compare-and-
// swap on the ConfigMap's resourceVersion, so two applications electing at
// once see each other's reservation and cannot both crowd one node.
type Record struct {
	Client    corev1client.ConfigMapsGetter
	Namespace string
	Log       *slog.Logger // warnings about entries left out (nil: discarded)
	// Clock dates reservations and ages entries (nil: the real one).
	// Entries are compared across candidates, so a fake one must be
	// shared by every candidate of a test.
	Clock clock.PassiveClock
}

func (r *Record) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

// decodeEntries returns the record's live entries. An entry that does not
// decode (hand-edited, or written by something else) or has expired is
// left out, with a warning naming it: one bad line must not block every
// election in the namespace. The next write drops it from the record.
func decodeEntries(cm *v1.ConfigMap, log *slog.Logger, now time.Time) map[string]Entry {
	out := map[string]Entry{}
	for app, raw := range cm.Data {
		var e Entry
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			if log != nil {
				log.Warn("leader record: leaving out an entry that does not decode", "record", cm.Namespace+"/"+cm.Name, "entry", app, "err", err)
			}
			continue
		}
		if e.Expires.After(now.Add(entryLife * MaxLease)) {
			if log != nil {
				log.Warn("leader record: leaving out an entry that claims its node too far ahead", "record", cm.Namespace+"/"+cm.Name, "entry", app, "expires", e.Expires)
			}
			continue
		}
		if e.expired(now) {
			if log != nil {
				log.Info("leader record: leaving out an expired entry", "record", cm.Namespace+"/"+cm.Name, "entry", app, "node", e.Node, "expired", e.Expires)
			}
			continue
		}
		out[app] = e
	}
	return out
}

// Placement reads the record as application → leader node.
func (r *Record) Placement(ctx context.Context) (balance.Placement, error) {
	return r.read(ctx, "").Placement()
}

// Snapshot is the record's ConfigMap as read at some moment (Err holds
// the read's error; NotFound means there is no record yet).
type Snapshot struct {
	cm    *v1.ConfigMap
	err   error
	log   *slog.Logger
	clock clock.PassiveClock
}

// Read takes a snapshot, for a caller that reads the record ahead of
// time. It comes from the API server's watch cache (resourceVersion 0),
// which spares etcd a read but may lag the latest write by a moment: a
// compare-and-swap on a stale snapshot fails and reads again, from etcd.
func (r *Record) Read(ctx context.Context) Snapshot {
	return r.read(ctx, "0")
}

func (r *Record) read(ctx context.Context, rv string) Snapshot {
	cm, err := r.Client.ConfigMaps(r.Namespace).Get(ctx, RecordName, metav1.GetOptions{ResourceVersion: rv})
	return Snapshot{cm: cm, err: err, log: r.Log, clock: r.clock()}
}

// Placement reads a snapshot as application → leader node; no record
// yet is an empty placement.
func (s Snapshot) Placement() (balance.Placement, error) {
	p := balance.Placement{}
	if apierrors.IsNotFound(s.err) {
		return p, nil
	}
	if s.err != nil {
		return nil, s.err
	}
	for app, e := range decodeEntries(s.cm, s.log, s.clock.Now()) {
		p[app] = e.Node
	}
	return p, nil
}

// modify applies f to the record's entries and writes them back with a
// compare-and-swap, retrying on conflicts. f returns false to leave the
// record unchanged. A non-nil first serves as the first read.
func (r *Record) modify(ctx context.Context, first *Snapshot, f func(map[string]Entry) bool) (bool, error) {
	cms := r.Client.ConfigMaps(r.Namespace)
	for attempt := 0; ; attempt++ {
		var snap Snapshot
		if attempt == 0 && first != nil {
			snap = *first
		} else {
			snap = r.read(ctx, "")
		}
		cm, err := snap.cm, snap.err
		create := apierrors.IsNotFound(err)
		if create {
			cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RecordName, Namespace: r.Namespace}}
		} else if err != nil {
			return false, err
		}
		entries := decodeEntries(cm, r.Log, r.clock().Now())
		if !f(entries) {
			return false, nil
		}
		cm.Data = map[string]string{}
		for app, e := range entries {
			b, _ := json.Marshal(e)
			cm.Data[app] = string(b)
		}
		if create {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		} else {
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err == nil {
			return true, nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return false, err
		}
		if attempt > 50 {
			return false, fmt.Errorf("leader record: gave up after %d conflicts", attempt)
		}
	}
}

// Reserve writes app's leader as holder on node when qualifies accepts
// the record as it stands, atomically. An application has one reservation
// at a time: a fresher one by another candidate (younger than fresh, the
// application's lease duration, which also sets how long the entry lasts)
// stands, unless it belongs to previous, the holder whose lease ran out.
// Without that, a losing candidate dropping its reservation would leave
// the winner's node looking empty to the other applications.
//
// It returns ErrReserved when another candidate's reservation stands.
func (r *Record) Reserve(ctx context.Context, first *Snapshot, app, holder, node, previous string, fresh time.Duration, qualifies func(balance.Placement) (bool, error)) (bool, error) {
	taken := false
	var qerr error
	ok, err := r.modify(ctx, first, func(m map[string]Entry) bool {
		e, ok := m[app]
		taken = ok && e.Holder != holder && e.Holder != previous && r.clock().Since(e.Time) < fresh
		if taken {
			return false
		}
		p := balance.Placement{}
		for a, e := range m {
			p[a] = e.Node
		}
		var q bool
		if q, qerr = qualifies(p); !q {
			return false
		}
		m[app] = r.newEntry(node, holder, fresh)
		return true
	})
	switch {
	case err != nil:
		return false, err
	case qerr != nil:
		return false, fmt.Errorf("leader record: %w", qerr)
	case taken:
		return false, ErrReserved
	}
	return ok, nil
}

// ErrReserved: another candidate of the application holds a fresh
// reservation and is taking the lease, so this one waits like a follower.
var ErrReserved = errors.New("another candidate of this election holds the reservation")

// Release removes app's entry if holder still owns it.
func (r *Record) Release(ctx context.Context, app, holder string) error {
	_, err := r.modify(ctx, nil, func(m map[string]Entry) bool {
		if e, ok := m[app]; !ok || e.Holder != holder {
			return false
		}
		delete(m, app)
		return true
	})
	return err
}

// Confirm (re)writes app's entry for its leader, if it is missing, names
// another holder or node, or is due for a refresh (older than lease).
func (r *Record) Confirm(ctx context.Context, app, holder, node string, lease time.Duration) error {
	_, err := r.modify(ctx, nil, func(m map[string]Entry) bool {
		if e, ok := m[app]; ok && e.Holder == holder && e.Node == node && r.clock().Since(e.Time) < lease {
			return false
		}
		m[app] = r.newEntry(node, holder, lease)
		return true
	})
	return err
}

// newEntry is a claim that lasts entryLife leases (forever without a
// lease duration).
func (r *Record) newEntry(node, holder string, lease time.Duration) Entry {
	e := Entry{Node: node, Holder: holder, Time: r.clock().Now().UTC()}
	if lease > 0 {
		e.Expires = e.Time.Add(entryLife * lease)
	}
	return e
}
