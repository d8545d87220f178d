package bld

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ringside/ringside/bld/balance"
)

// A candidate held to an instant (CampaignAt) neither campaigns nor
// reads or writes its lock before its clock reaches it, and campaigns
// then; cancelled while held, it ends without campaigning. A
// bld-optimistic candidate builds its view of the Leases while it waits
// (a list and a watch, nothing else), so that its campaign starts with
// it, as every election after the first does; the default election asks
// nothing.
func TestCandidateCampaignsAtItsInstant(t *testing.T) {
	for _, tc := range []struct {
		alg       string
		cancelled bool
	}{{balance.BLDOptimistic, false}, {balance.BLDOptimistic, true}, {balance.Default, false}} {
		cancelled := tc.cancelled
		fc := clocktesting.NewFakeClock(time.Now())
		cs := fake.NewSimpleClientset()
		events := make(chan string, 16)
		c, err := NewCandidate(CandidateConfig{Algorithm: tc.alg, Election: "app", Namespace: "ns", Identity: "me", Node: "w1",
			Client: cs, LeaseDuration: 10 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: time.Second, Clock: fc,
			CampaignAt: fc.Now().Add(3 * time.Second), OnEvent: func(ev, _ string) { keep(events, ev) }})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()

		require.Eventually(t, fc.HasWaiters, 10*time.Second, time.Millisecond, "the candidate waits on its clock")
		fc.Step(2 * time.Second)
		require.Eventually(t, fc.HasWaiters, 10*time.Second, time.Millisecond, "a second early, it still waits")
		assert.Empty(t, events, "no event before the instant")
		if tc.alg == balance.Default {
			assert.Empty(t, cs.Actions(), "no request before the instant")
		} else {
			require.Eventually(t, func() bool { return len(cs.Actions()) >= 2 }, 10*time.Second, time.Millisecond, "the view is built while held")
			for _, a := range cs.Actions() {
				assert.Contains(t, []string{"list", "watch"}, a.GetVerb(), "only the view's reads before the instant: %v", a)
				assert.Equal(t, "leases", a.GetResource().Resource)
			}
		}
		if cancelled {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("a cancelled candidate kept waiting for its instant")
			}
			assert.Empty(t, events, "a cancelled candidate never campaigned")
			continue
		}
		fc.Step(time.Second)
		select {
		case ev := <-events:
			assert.Equal(t, "campaign", ev)
		case <-time.After(10 * time.Second):
			t.Fatal("no campaign at the instant")
		}
		cancel()
		<-done
	}
}

// keep sends ev on events unless its buffer is full: a test reads the
// first events, and the candidate must not block on the rest (with the
// fake API server, which writes no resourceVersion, a bld-optimistic
// candidate's validation fails at every try, and each try names a leader;
// a blocked OnEvent then held Run, and the test, past its timeout).
func keep(events chan string, ev string) {
	select {
	case events <- ev:
	default:
	}
}

// An instant further ahead than MaxCampaignWait is a mistake, refused
// with the instant named; one in the past campaigns at once.
func TestCampaignInstantBounds(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	cfg := CandidateConfig{Algorithm: balance.Default, Election: "app", Namespace: "ns", Identity: "me", Node: "w1",
		Client: fake.NewSimpleClientset(), LeaseDuration: 10 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: time.Second, Clock: fc}
	cfg.CampaignAt = fc.Now().Add(MaxCampaignWait + time.Minute)
	_, err := NewCandidate(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "campaign at "+cfg.CampaignAt.Format(time.RFC3339Nano))

	cfg.CampaignAt = fc.Now().Add(-time.Hour)
	campaigned := make(chan struct{})
	cfg.OnEvent = func(ev, _ string) {
		if ev == "campaign" {
			close(campaigned)
		}
	}
	c, err := NewCandidate(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	select {
	case <-campaigned:
	case <-time.After(10 * time.Second):
		t.Fatal("an instant in the past held the campaign back")
	}
}
