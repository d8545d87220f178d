package main

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/experiments/backend/kube/controlplane"
	"github.com/ringside/ringside/internal/fdtest"
	"github.com/ringside/ringside/internal/klogslog"
)

func TestMain(m *testing.M) {
	fdtest.RunChild(main)
	klogslog.Install() // as main does, before any test runs client-go
	os.Exit(m.Run())
}

// Flooded with more connections than it may open files, an elector
// campaigning against a real API server keeps its process and serves its
// sidecar API again once the flood has gone.
func TestOutlivesAConnectionFlood(t *testing.T) {
	cp, err := controlplane.Start(context.Background(), t.TempDir())
	require.NoError(t, err)
	t.Cleanup(cp.Stop)
	fdtest.Check(t, nil, 1, "/healthz", func(a []string) []string {
		return []string{"--kubeconfig", cp.Kubeconfig, "--http", a[0], "--advertise", a[0], "--election", "flood", "--id", "flood-0", "--node", "w1", "--log-level", "error"}
	})
}
