package controlplane

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1alpha2 "k8s.io/api/coordination/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CheckCoordinatedElection reports whether the API server behind cs
// serves coordinated leader election: the LeaseCandidate API, and Leases
// that keep a strategy and a preferred holder (a server without the
// feature gate drops both fields silently). It creates and deletes one
// object of each in namespace default.
func CheckCoordinatedElection(ctx context.Context, cs kubernetes.Interface) error {
	const ns, name = "default", "ringside-coordinated-check"
	candidates := cs.CoordinationV1alpha2().LeaseCandidates(ns)
	_, err := candidates.Create(ctx, &coordinationv1alpha2.LeaseCandidate{
		ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"},
		Spec: coordinationv1alpha2.LeaseCandidateSpec{LeaseName: name, BinaryVersion: "1.32.0", EmulationVersion: "1.32.0",
			Strategy: coordinationv1.CoordinatedLeaseStrategy("ringside.io/balanced"), RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("LeaseCandidate API (%s): %w", CoordinatedElectionAPI, err)
	}
	candidates.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.leaseName=" + name})
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
