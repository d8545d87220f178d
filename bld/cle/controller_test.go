package cle

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/api/coordination/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ringside/ringside/bld"
	"github.com/ringside/ringside/bld/strategy"
)

func lease(name, holder string, renew time.Time, secs int32) *coordinationv1.Lease {
	st := coordinationv1.CoordinatedLeaseStrategy(strategy.Name)
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "x"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, Strategy: &st, LeaseDurationSeconds: &secs, RenewTime: &metav1.MicroTime{Time: renew}}}
}

func candidate(name, leaseName string, ann map[string]string, renew time.Time) *v1alpha2.LeaseCandidate {
	t := metav1.NewMicroTime(renew)
	return &v1alpha2.LeaseCandidate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "x", Annotations: ann},
		Spec: v1alpha2.LeaseCandidateSpec{LeaseName: leaseName, Strategy: strategy.Name, BinaryVersion: "1.0.0", RenewTime: &t}}
}

// Records a candidate controls are input like any other: a node
// annotation that is missing, not a node name or absurdly long leaves
// that candidate out (the others are still named), a Lease of another
// strategy is not touched, and a Lease held for the longest duration
// the field allows keeps its holder.
func TestHostileRecordsAreLeftOut(t *testing.T) {
	now := time.Now()
	past := now.Add(-time.Minute)
	node := func(n string) map[string]string { return map[string]string{bld.NodeAnnotation: n} }
	other := lease("other", bld.Unassigned, past, 1)
	foreign := coordinationv1.CoordinatedLeaseStrategy("example.com/other")
	other.Spec.Strategy = &foreign
	cs := fake.NewClientset(
		lease("a", bld.Unassigned, past, 2),
		lease("b", bld.Unassigned, past, 2),
		lease("held", "someone", now, 1<<31-1),
		other,
		candidate("good", "a", node("w1"), now),
		candidate("traversal", "a", node("../../w1"), now),
		candidate("none", "b", nil, now),
		candidate("long", "b", node(strings.Repeat("w", 300)), now),
		candidate("upper", "b", node("W1"), now),
		candidate("c-held", "held", node("w2"), now),
		candidate("c-other", "other", node("w3"), now),
	)
	var decisions []strategy.Decision
	decided := make(chan strategy.Decision, 16)
	ctl, err := New(Config{Client: cs, Namespace: "x", AckWait: 200 * time.Millisecond, Resync: 50 * time.Millisecond,
		Log: slog.New(slog.DiscardHandler), OnDecision: func(_ string, d strategy.Decision) { decided <- d }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	select {
	case d := <-decided:
		decisions = append(decisions, d)
	case <-time.After(30 * time.Second):
		t.Fatal("no decision within 30 s")
	}
	require.Equal(t, strategy.Decision{Election: "a", Holder: "good"}, decisions[0])
	// Let it look several times more; nothing else may be decided (the
	// fake API server does not refuse a write on a stale
	// resourceVersion, so the same decision may come again before the
	// cache has the first).
	for range 5 {
		ctl.poke()
		select {
		case d := <-decided:
			require.Equal(t, decisions[0], d, "a decision for a hostile or foreign record")
		case <-time.After(100 * time.Millisecond):
		}
	}
	cancel()
	require.NoError(t, <-done)
	for _, name := range []string{"b", "held", "other"} {
		l, err := cs.CoordinationV1().Leases("x").Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotContains(t, []string{"none", "long", "upper", "traversal", "c-other"}, *l.Spec.HolderIdentity, name)
		require.Nil(t, l.Spec.PreferredHolder, name)
	}
}
