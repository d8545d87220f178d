package bld

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/clock"

	"github.com/ringside/ringside/bld/balance"
)

// bld-optimistic's picture of its namespace, kept by a watch of its
// Leases, each naming its holder's node (LeaderNodeAnnotation).
//
// BLD reserves a node in one shared record before it takes the lease, so
// every application's election pays a compare-and-swap more than the
// default election's, and a burst of elections queues on that one object.
// bld-optimistic takes its own Lease first and then validates in the
// order the API server committed the writes: a watch delivers events in
// that order, so the Leases as they stood just before this candidate's
// write came in are exactly the elections that went before it, and BLD's
// condition on them is the check a serialised reservation would have
// made. The winner waits only for its own write's event. Before writing,
// a candidate checks the condition on the Leases as watched, which costs
// no round trip and keeps most of a burst from landing on one node.

// maxVerdicts bounds the placements kept for writes of this candidate
// whose validation may still ask for them.
const maxVerdicts = 8

// leaseView is one Lease as the watch delivered it.
type leaseView struct {
	holder, node string
	renew        time.Time
	duration     time.Duration
	// valid: its holder's acquisition met BLD's condition on the valid
	// leaders the watch delivered before it. A holder that did not frees
	// the Lease moments later, and until then it is no leader: counted,
	// it would make a crowded node look fair to the writes after it
	// (seen on kind: three such holders raised L from 2 to 5, a leader
	// landed on a node that already held one, the holders freed, 3:1:3).
	valid bool
}

// sameHolder reports whether l is o's holder on o's node still: a
// renewal, which changes no balance.
func (l leaseView) sameHolder(o leaseView) bool {
	return l.holder == o.holder && l.node == o.node
}

// held reports whether the Lease names a holder whose term runs at now.
func (l leaseView) held(now time.Time) bool {
	return l.holder != "" && now.Before(l.renew.Add(l.duration))
}

// view is a candidate's picture of its namespace. Its handler runs in the
// watch's order; the methods are safe for concurrent use.
type view struct {
	election, identity string
	clock              clock.PassiveClock
	kick               func() // a waiting candidate should look again

	mu      sync.Mutex
	leases  map[string]leaseView
	at      map[string]balance.Placement // the others' placement just before each write of ours landed
	atOrder []string
	arrived chan struct{}         // closed, and replaced, whenever at grows
	moves   uint64                // changes of the other elections' holders or nodes seen
	node    string                // this candidate's node
	workers int                   // N, the worker nodes BLD counts, once ready
	ready   chan struct{}         // closed once workers is set
	need    chan struct{}         // closed once judging a Lease needs workers
	refused bool                  // the gate refused this candidate since its last kick
	mine    *coordinationv1.Lease // this election's Lease as last delivered (nil: absent)
	synced  chan struct{}         // closed once the watch's first list is applied
}

func newView(election, identity, node string, clk clock.PassiveClock, kick func()) *view {
	return &view{election: election, identity: identity, node: node, clock: clk, kick: kick,
		leases: map[string]leaseView{}, at: map[string]balance.Placement{},
		arrived: make(chan struct{}), synced: make(chan struct{}), ready: make(chan struct{}), need: make(chan struct{})}
}

// setWorkers gives the view N. Only an acquisition onto a node that holds
// a valid leader needs it (onto an empty node one always qualifies), so
// it is listed when one first comes: the watch's handler waits for it
// then (needed), and a burst's first elections pay no list.
func (v *view) setWorkers(n int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.workers = n
	closeOnce(v.ready)
}

// closeOnce closes ch unless it is closed; the caller holds v.mu, so two
// callers cannot both close it.
func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// waitSynced blocks until the watch has delivered its first list: the
// candidate's first read of the election, in place of the lock's. (No
// poll: client-go's WaitForCacheSync looks every 100 ms, most of which it
// would add to every election.)
func (v *view) waitSynced(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-v.synced:
	}
}

func (v *view) lease(obj any, deleted bool) {
	l, tombstone, ok := asLease(obj)
	if !ok {
		return
	}
	deleted = deleted || tombstone
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
	if l.Name == v.election {
		v.mine = l
		if deleted {
			v.mine = nil
		}
	}
	lv, was := leaseView{}, v.leases[l.Name]
	if deleted {
		delete(v.leases, l.Name)
	} else {
		lv = leaseOf(l)
		switch {
		case lv.holder == "":
		case lv.sameHolder(was):
			lv.valid = was.valid // a renewal: judged when its holder took it
		default:
			lv.valid = v.qualifiesLocked(l.Name, lv.node, now)
		}
		v.leases[l.Name] = lv
	}
	kick := false
	if l.Name == v.election {
		// A Lease that stops naming a holder (released, or freed after a
		// failed validation) is free at once: look again now.
		kick = was.holder != "" && lv.holder == ""
	} else if !lv.sameHolder(was) {
		// Another application's leader came, went or moved: the balance
		// the gate refused this candidate on is not the balance now (a
		// leader elsewhere can make a crowded node qualify). When it now
		// would pass, look again at once rather than at the end of the
		// gate's backoff, which grows to a retry period. Renewals change
		// neither and kick no one.
		v.moves++
		kick = v.refused && v.leases[v.election].holder == "" && v.qualifiesLocked(v.election, v.node, now)
		if kick {
			v.refused = false
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

// placementLocked is where the other elections' leaders are at now: each
// held Lease that names its holder's node. A Lease held for longer than
// MaxLease ahead, by its duration or a renewal in the future, was not
// written by a candidate (NewCandidate refuses such leases): left out, as
// the record leaves out such an entry, so that it cannot hold a node for
// ever.
func (v *view) placementLocked(now time.Time) balance.Placement {
	return v.leadersLocked(v.election, now)
}

// leadersLocked is placementLocked for any election: the valid leaders
// of every other one.
func (v *view) leadersLocked(election string, now time.Time) balance.Placement {
	p := balance.Placement{}
	for name, l := range v.leases {
		if name != election && l.valid && l.node != "" && l.held(now) && l.duration <= MaxLease && !l.renew.After(now.Add(MaxLease)) {
			p[name] = l.node
		}
	}
	return p
}

// needed reports whether judging obj needs N and the view lacks it (then
// asking for it): a new holder onto a node that holds a valid leader.
func (v *view) needed(obj any) bool {
	select {
	case <-v.ready:
		return false // every change once N is known: renewals cost nothing here
	default:
	}
	l, _, ok := asLease(obj)
	if !ok {
		return false
	}
	lv, now := leaseOf(l), v.clock.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	if lv.holder == "" || lv.sameHolder(v.leases[l.Name]) || v.leadersLocked(l.Name, now).Counts(l.Name)[lv.node] == 0 {
		return false
	}
	closeOnce(v.need)
	return true
}

// qualifiesLocked judges an acquisition of election's Lease by a holder
// on node, as its candidate's validation does: BLD's condition on the
// valid leaders before it. A holder that names no node is judged by no
// node's count.
func (v *view) qualifiesLocked(election, node string, now time.Time) bool {
	return balance.Qualifies(balance.BLDOptimistic, election, node, v.leadersLocked(election, now), make([]string, v.workers), nil)
}

// placement is the other elections' leaders now.
func (v *view) placement() balance.Placement {
	p, _ := v.placementSeen()
	return p
}

// placementSeen is placement and how many changes of those leaders the
// view had seen, for gated.
func (v *view) placementSeen() (balance.Placement, uint64) {
	now := v.clock.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.placementLocked(now), v.moves
}

// gated learns the gate's answer on the placement taken with seen: a
// refused candidate is kicked at the next change of the others' leaders
// that lets it pass — at once, when one came in while the gate decided.
func (v *view) gated(ok bool, seen uint64) {
	v.mu.Lock()
	v.refused = !ok
	now := v.refused && v.moves != seen && v.qualifiesLocked(v.election, v.node, v.clock.Now())
	if now {
		v.refused = false
	}
	v.mu.Unlock()
	if now {
		v.kick()
	}
}

// own is this election's Lease as the watch last delivered it (nil:
// absent), and whether the watch has delivered its first list.
func (v *view) own() (*coordinationv1.Lease, bool) {
	select {
	case <-v.synced:
	default:
		return nil, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.mine, true
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
