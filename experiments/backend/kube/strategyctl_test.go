package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The strategy controller controls when its Lease names a holder that
// wrote it since the backend started it, or one whose renewal is live —
// not when the Lease is free, released, or left by a controller long gone.
func TestControls(t *testing.T) {
	now := time.Now()
	lease := func(rv, holder string, renewed time.Duration) *coordinationv1.Lease {
		secs := int32(15)
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &metav1.MicroTime{Time: now.Add(-renewed)}}}
	}
	require.True(t, controls(lease("2", "ctl-0", time.Hour), "1", now), "written since, whatever the clocks say")
	require.True(t, controls(lease("2", "ctl-0", time.Hour), "", now), "created since")
	require.True(t, controls(lease("1", "ctl-0", time.Second), "1", now), "a controller that ran before, renewing")
	require.False(t, controls(lease("1", "ctl-0", time.Minute), "1", now), "left by a controller gone")
	require.False(t, controls(lease("2", "", 0), "1", now), "released")
	require.False(t, controls(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "2"}}, "1", now), "no holder")
}
