package bld

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ringside/ringside/bld/balance"
	"github.com/ringside/ringside/bld/strategy"
)

// A candidate the controller names leads on the term the controller
// wrote, before its own elector has renewed the Lease — and, if that
// renewal never comes, steps down by the term's renewal plus the renew
// deadline, as client-go's own leadership would; a term it sees too late
// for that is not led on until renewed. A renewal ahead of the
// candidate's clock (another clock, a hostile writer) buys no more than
// one renewed now, and once.
func TestNamedCandidateLeadsOnTheControllersTerm(t *testing.T) {
	for _, ahead := range []time.Duration{0, time.Hour} {
		t.Run("renewal ahead by "+ahead.String(), func(t *testing.T) { namedCandidateLeads(t, ahead) })
	}
}

func namedCandidateLeads(t *testing.T, ahead time.Duration) {
	fc := clocktesting.NewFakeClock(time.Now())
	cs := fake.NewSimpleClientset()
	var renewals atomic.Bool // the API server refuses the candidate's writes to its Lease until set
	var refused atomic.Int32
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !renewals.Load() {
			refused.Add(1)
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	events := make(chan string, 64)
	const renewDeadline = 2 * time.Second
	c, err := NewCandidate(CandidateConfig{Algorithm: balance.CLEBalanced, Election: "app", Namespace: "ns", Identity: "me", Node: "w1",
		Client: cs, LeaseDuration: 3 * time.Second, RenewDeadline: renewDeadline, RetryPeriod: 100 * time.Millisecond, Clock: fc,
		OnEvent: func(ev, _ string) {
			if ev == "started" || ev == "stopped" {
				events <- ev
			}
		}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)

	require.Eventually(t, func() bool {
		_, err := cs.CoordinationV1alpha2().LeaseCandidates("ns").Get(ctx, "me", metav1.GetOptions{})
		return err == nil
	}, 10*time.Second, 5*time.Millisecond, "the candidate registers")
	// The controller's write, which the reactor does not see: the Lease
	// names the candidate, renewed now.
	name := func(at time.Time) {
		t.Helper()
		l, err := cs.CoordinationV1().Leases("ns").Get(ctx, "app", metav1.GetOptions{})
		require.NoError(t, err)
		me, renew := "me", metav1.NewMicroTime(at)
		l.Spec.HolderIdentity, l.Spec.RenewTime = &me, &renew
		require.NoError(t, cs.Tracker().Update(coordinationv1.SchemeGroupVersion.WithResource("leases"), l, "ns"))
	}
	next := func(what string) string {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatalf("no event: want %s", what)
			return ""
		}
	}

	// The candidate's informer watches after it lists, and the fake API
	// server does not replay what changed between the two: name it again
	// until it leads (on a loaded machine the first naming can fall in
	// that gap).
	term := fc.Now().Add(ahead)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	deadline := time.After(10 * time.Second)
	for named := false; !named; {
		name(term)
		select {
		case ev := <-events:
			require.Equal(t, "started", ev, "leads on the controller's term, with every renewal refused")
			named = true
		case <-poll.C:
		case <-deadline:
			t.Fatal("not leading 10 s after it was named")
		}
	}
	l, _, ok := c.LeaderTerm()
	assert.Equal(t, "me", l, "the sidecar names it")
	assert.True(t, ok)
	require.Eventually(t, fc.HasWaiters, 10*time.Second, time.Millisecond)
	fc.Step(renewDeadline - time.Millisecond)
	select {
	case ev := <-events:
		t.Fatalf("%s within the term", ev)
	default:
	}
	fc.Step(time.Millisecond)
	require.Equal(t, "stopped", next("stopped"), "steps down at the renewal plus the renew deadline")
	l, _, _ = c.LeaderTerm()
	assert.Empty(t, l)

	// Still named, by a Lease valid another second, but too late to lead
	// on: only a renewal of its own makes it lead again.
	name(fc.Now().Add(-renewDeadline))
	before := refused.Load()
	require.Eventually(t, func() bool { return refused.Load() >= before+3 }, 10*time.Second, 5*time.Millisecond,
		"its elector tries to renew")
	select {
	case ev := <-events:
		t.Fatalf("%s on a term a renew deadline old", ev)
	default:
	}
	renewals.Store(true)
	require.Equal(t, "started", next("started after a renewal"))
	l, _, _ = c.LeaderTerm()
	assert.Equal(t, "me", l)
}

// A candidate named from its Pod (the controller created its Lease
// naming it) leads on its first read, before its LeaseCandidate exists;
// a registration the API server refuses ends the campaign with an error
// naming it, whether the candidate was leading or waiting.
func TestANamedCandidateLeadsBeforeItRegisters(t *testing.T) {
	for _, named := range []bool{true, false} {
		t.Run(fmt.Sprintf("named %v", named), func(t *testing.T) {
			holder, now := "someone-else", time.Now()
			if named {
				holder = "me"
			}
			secs, st := int32(10), coordinationv1.CoordinatedLeaseStrategy(strategy.Name)
			cs := fake.NewSimpleClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns"},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, Strategy: &st, LeaseDurationSeconds: &secs, RenewTime: &metav1.MicroTime{Time: now}}})
			release := make(chan struct{})
			cs.PrependReactor("create", "leasecandidates", func(k8stesting.Action) (bool, runtime.Object, error) {
				<-release
				return true, nil, errors.New("etcdserver: no space")
			})
			events := make(chan string, 8)
			c, err := NewCandidate(CandidateConfig{Algorithm: balance.CLEBalanced, Election: "app", Namespace: "ns", Identity: "me", Node: "w1",
				Client: cs, LeaseDuration: 10 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: time.Second,
				OnEvent: func(ev, _ string) { keep(events, ev) }})
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() { done <- c.Run(context.Background()) }()
			for leading := !named; !leading; {
				select {
				case ev := <-events:
					leading = ev == "started" // while its registration is still under way
				case <-time.After(10 * time.Second):
					t.Fatal("named, it did not lead before its registration came back")
				}
			}
			close(release)
			select {
			case err := <-done:
				require.ErrorContains(t, err, "registering its LeaseCandidate")
				require.ErrorContains(t, err, "no space")
			case <-time.After(10 * time.Second):
				t.Fatal("the campaign went on after its registration failed")
			}
		})
	}
}

// A term the controller wrote is led on until its renewal plus the
// smaller of the renew deadline and the Lease's own duration (a holder
// named from its Pod gets the Pod's duration, after which the controller
// may name another); a duration that is no duration leads on nothing.
func TestATermNeverOutlastsItsLease(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	c, err := NewCandidate(CandidateConfig{Algorithm: balance.CLEBalanced, Election: "app", Namespace: "ns", Identity: "me", Node: "w1",
		Client: fake.NewSimpleClientset(), LeaseDuration: 10 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: time.Second, Clock: fc})
	require.NoError(t, err)
	for _, tc := range []struct {
		secs int32
		want time.Duration
	}{{2, 2 * time.Second}, {10, 5 * time.Second}, {1 << 30, 5 * time.Second}, {0, 0}, {-7, -7 * time.Second}} {
		me, renew, secs := "me", metav1.NewMicroTime(fc.Now()), tc.secs
		c.noteLease(&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: &me, RenewTime: &renew, LeaseDurationSeconds: &secs}})
		_, left := c.term(fc.Now())
		assert.Equal(t, tc.want, left, "a %d-s Lease", tc.secs)
	}
}

// A leader the controller moves names the candidate it moves to in its
// "stopped"; a leader whose Lease another candidate took without a move
// (its renewals lost) names nobody: an experiment tells the strategy's
// moves from a loaded machine's re-elections by it.
func TestAMovedLeaderNamesItsSuccessor(t *testing.T) {
	for _, tc := range []struct{ name, holder, preferred, want string }{
		{"moved", "me", "next", "next"},
		{"lost", "other", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			me, secs, st := "me", int32(10), coordinationv1.CoordinatedLeaseStrategy(strategy.Name)
			cs := fake.NewSimpleClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns"},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &me, Strategy: &st, LeaseDurationSeconds: &secs, RenewTime: &metav1.MicroTime{Time: time.Now()}}})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			events := make(chan [2]string, 8)
			c, err := NewCandidate(CandidateConfig{Algorithm: balance.CLEBalanced, Election: "app", Namespace: "ns", Identity: "me", Node: "w1",
				Client: cs, LeaseDuration: 10 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: time.Second,
				OnEvent: func(ev, who string) {
					select {
					case events <- [2]string{ev, who}:
					case <-ctx.Done():
					}
				}})
			require.NoError(t, err)
			go c.Run(ctx)
			started := false
			for !started {
				select {
				case ev := <-events:
					started = ev[0] == "started"
				case <-time.After(10 * time.Second):
					t.Fatal("not leading on a Lease that names it")
				}
			}
			// The controller's (or the other candidate's) write. The
			// candidate's informer watches after it lists, and the fake API
			// server does not replay what changed between the two: write it
			// again until the leader steps down.
			write := func() {
				l, err := cs.CoordinationV1().Leases("ns").Get(ctx, "app", metav1.GetOptions{})
				require.NoError(t, err)
				holder := tc.holder
				l.Spec.HolderIdentity = &holder
				if tc.preferred != "" {
					l.Spec.PreferredHolder = &tc.preferred
				}
				_, err = cs.CoordinationV1().Leases("ns").Update(ctx, l, metav1.UpdateOptions{})
				require.NoError(t, err)
			}
			poll := time.NewTicker(50 * time.Millisecond)
			defer poll.Stop()
			deadline := time.After(10 * time.Second)
			for write(); ; {
				select {
				case ev := <-events:
					if ev[0] == "stopped" {
						assert.Equal(t, tc.want, ev[1])
						return
					}
				case <-poll.C:
					write()
				case <-deadline:
					t.Fatal("still leading 10 s after the write")
				}
			}
		})
	}
}

// The successor a leader's "stopped" names is the one the move that ended
// it named, whatever Lease is seen between the step-down and the leader's
// goroutine waking: in the fake API server, which keeps no resource
// versions, the elector's renewal can overwrite the move and be seen in
// that gap (a CI run read "" so); a real one can carry any later write.
func TestASteppedDownLeaderKeepsTheMoveThatEndedIt(t *testing.T) {
	me, next, secs := "me", "next", int32(10)
	named := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns", ResourceVersion: "1"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &me, LeaseDurationSeconds: &secs, RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	c, err := NewCandidate(CandidateConfig{Algorithm: balance.CLEBalanced, Election: "app", Namespace: "ns", Identity: "me", Node: "w1",
		Client: fake.NewSimpleClientset(named.DeepCopy()), LeaseDuration: 10 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: time.Second})
	require.NoError(t, err)
	c.noteLease(named)
	moved := named.DeepCopy()
	moved.ResourceVersion, moved.Spec.PreferredHolder = "2", &next
	unmoved := named.DeepCopy() // a later write without the move
	unmoved.ResourceVersion = "3"

	leases := make(chan *coordinationv1.Lease, 1)
	got := make(chan string, 1)
	go c.lead(context.Background(), leases, func(lctx context.Context) {
		leases <- moved
		<-lctx.Done()
		c.noteLease(unmoved)
		got <- successor(lctx)
	})
	select {
	case to := <-got:
		assert.Equal(t, next, to)
	case <-time.After(10 * time.Second):
		t.Fatal("the leader did not step down on the move")
	}
}
