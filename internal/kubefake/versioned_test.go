package kubefake

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestUpdatesAreGuardedByTheVersion(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	Versioned(cs)
	leases := cs.CoordinationV1().Leases("x")

	holder := func(s string) *string { return &s }
	created, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: holder("one")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, created.ResourceVersion, "a created object is numbered")

	first := created.DeepCopy()
	first.Spec.HolderIdentity = holder("two")
	updated, err := leases.Update(ctx, first, metav1.UpdateOptions{})
	require.NoError(t, err, "an update on the stored version")
	assert.NotEqual(t, created.ResourceVersion, updated.ResourceVersion, "and it is numbered anew")

	stale := created.DeepCopy() // the version before the update
	stale.Spec.HolderIdentity = holder("three")
	_, err = leases.Update(ctx, stale, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsConflict(err), "a stale version is refused: %v", err)
	got, err := leases.Get(ctx, "a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "two", *got.Spec.HolderIdentity, "the stored object is the last good one")

	unconditional := got.DeepCopy()
	unconditional.ResourceVersion = ""
	unconditional.Spec.HolderIdentity = holder("four")
	_, err = leases.Update(ctx, unconditional, metav1.UpdateOptions{})
	require.NoError(t, err, "no version: unconditional, as the API server allows for Leases")

	_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "b", ResourceVersion: "7"}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsBadRequest(err), "a create naming a version: %v", err)
	_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsAlreadyExists(err), "%v", err)
	_, err = leases.Update(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "missing", Namespace: "x"}}, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
}
