// Package dockertest gives a test its own pool of worker containers on the
// real Docker engine: a fresh worker image, a private network and a pool
// label, all removed at the end. An unreachable engine fails the test.
package dockertest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/agent/runtime"
	"github.com/ringside/ringside/internal/imagebuild"
)

// Image is the worker image tests build (never a stale one: it is rebuilt
// once per test binary).
const Image = "ringside/worker:test"

// Pool builds the worker image and returns a runtime for a new pool.
func Pool(t *testing.T) *runtime.Docker {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, imagebuild.Build(ctx, Image, "github.com/ringside/ringside/cmd/worker"))
	pool := fmt.Sprintf("rt%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	d0, err := runtime.NewDocker(ctx, runtime.DockerOptions{})
	require.NoError(t, err, "the Docker engine must be reachable")
	_, err = d0.Client().NetworkCreate(ctx, pool, client.NetworkCreateOptions{Driver: "bridge"})
	require.NoError(t, err)
	d0.Close()
	d, err := runtime.NewDocker(ctx, runtime.DockerOptions{Image: Image, Network: pool, Pool: pool})
	require.NoError(t, err)
	t.Cleanup(func() {
		d.RemoveAll(context.Background())
		d.Client().NetworkRemove(context.Background(), pool, client.NetworkRemoveOptions{})
		d.Close()
	})
	return d
}

// WorkerBinary builds the worker as a static binary, for the process
// runtime.
func WorkerBinary(t *testing.T) string {
	t.Helper()
	bin, err := imagebuild.Static(context.Background(), "github.com/ringside/ringside/cmd/worker")
	require.NoError(t, err)
	return bin
}
