package kube

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/ringside/ringside/bld/cle"
	"github.com/ringside/ringside/bld/strategy"
)

// The ringside.io/balanced strategy's controller is infrastructure: in a
// cluster it runs before the applications that use it are created. The
// backends start it with a cle-balanced experiment, so they wait until a
// replica controls — holds its own Lease — before the applications
// launch, and its start-up is not counted as an application's election.
// (On kind its container started beside the candidates': in cells of
// three applications it named their first holders 0.2–2.1 s after the
// candidates had begun to campaign, where its Pods let it name them
// before.)

// controllerLease is the resourceVersion of the strategy controller's
// Lease in ns, "" while there is none; awaitController looks for a write
// after it.
func controllerLease(ctx context.Context, cs kubernetes.Interface, ns string) string {
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, cle.ControllerElection, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return l.ResourceVersion
}

// awaitController returns once a strategy controller replica holds its
// Lease in ns: a holder whose renewal has not run out by this clock (a
// controller that ran before), or a holder written since before — which
// does not depend on the clocks agreeing.
func awaitController(ctx context.Context, cs kubernetes.Interface, ns, before string) error {
	last := "no Lease yet"
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoordinationV1().Leases(ns).Get(ctx, cle.ControllerElection, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if controls(l, before, time.Now()) {
			return true, nil
		}
		last = "its Lease has no live holder"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the cle-balanced strategy controller in %s: %w (%s)", ns, err, last)
	}
	return nil
}

func controls(l *coordinationv1.Lease, before string, now time.Time) bool {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" {
		return false
	}
	if l.ResourceVersion != before {
		return true
	}
	if s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return false
	}
	return !strategy.Election{Holder: *s.HolderIdentity, RenewTime: s.RenewTime.Time, LeaseDuration: time.Duration(*s.LeaseDurationSeconds) * time.Second}.Free(now)
}
