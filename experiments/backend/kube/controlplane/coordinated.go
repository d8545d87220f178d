package controlplane

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CheckCoordinatedElection reports whether the API server behind cs
// serves coordinated leader election: the LeaseCandidate API, and Leases
// that keep a strategy and a preferred holder (a server without the
// feature gate drops both fields silently). It lists LeaseCandidates and
// creates and deletes one Lease in namespace default.
//
// It creates no LeaseCandidate: kube-apiserver v1.32's election
// controller (pkg/controlplane/controller/leaderelection) answers a
// candidate of a third-party strategy by creating its Lease without a
// holder, and on its next pass, five seconds on, dereferences that
// missing holder and takes the whole API server down (line 377 of
// leaderelection_controller.go in v1.32.13; fixed upstream by
// kubernetes/kubernetes#129973 in v1.33). A check that created and
// deleted a candidate crashed the server whenever its deletion came
// later than the pass: TestControlPlaneServesTheAPI failed with a reset
// connection, once in fifteen runs on a loaded machine. A Lease with no
// candidate is left alone by that controller.
func CheckCoordinatedElection(ctx context.Context, cs kubernetes.Interface) error {
	const ns, name = "default", "ringside-coordinated-check"
	if _, err := cs.CoordinationV1alpha2().LeaseCandidates(ns).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("LeaseCandidate API (%s): %w", CoordinatedElectionAPI, err)
	}
	strategy, holder := coordinationv1.CoordinatedLeaseStrategy("ringside.io/balanced"), "someone"
	leases := cs.CoordinationV1().Leases(ns)
	lease, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"},
		Spec:       coordinationv1.LeaseSpec{Strategy: &strategy, PreferredHolder: &holder},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("a Lease with a strategy: %w", err)
	}
	defer leases.Delete(context.WithoutCancel(ctx), lease.Name, metav1.DeleteOptions{})
	if lease.Spec.Strategy == nil || *lease.Spec.Strategy != strategy || lease.Spec.PreferredHolder == nil {
		return fmt.Errorf("a Lease lost its strategy or preferred holder (%v, %v): is the %s feature gate off?", lease.Spec.Strategy, lease.Spec.PreferredHolder, CoordinatedElectionGate)
	}
	return nil
}
