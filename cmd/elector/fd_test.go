package main

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/experiments/backend/kube/controlplane"
	"github.com/ringside/ringside/internal/fdtest"
)

func TestMain(m *testing.M) {
	fdtest.RunChild(main)
	os.Exit(m.Run())
}

// Flooded with more connections than it may open files, an elector
// campaigning against a real API server keeps its process and serves its
// sidecar API again once the flood has gone.
func TestOutlivesAConnectionFlood(t *testing.T) {
	cp, err := controlplane.Start(context.Background(), t.TempDir())
	require.NoError(t, err)
	t.Cleanup(cp.Stop)
	const limit = 64
	addr := fdtest.FreeAddr(t)
	p := fdtest.Start(t, limit, nil, "--kubeconfig", cp.Kubeconfig, "--http", addr, "--advertise", addr,
		"--election", "flood", "--id", "flood-0", "--node", "w1", "--log-level", "error")
	fdtest.Survives(t, p, limit, "http://"+addr+"/healthz", addr)
}
