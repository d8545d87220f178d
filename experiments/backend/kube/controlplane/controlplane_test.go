package controlplane

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestControlPlaneServesTheAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := Start(ctx, t.TempDir())
	require.NoError(t, err)
	defer cp.Stop()
	cs, err := cp.Clientset()
	require.NoError(t, err)
	v, err := cs.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Equal(t, "v1.32.13", v.GitVersion)
	_, err = cs.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
}
