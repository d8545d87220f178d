package imagebuild

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A prebuilt binary is taken only if it can run FROM scratch: a static
// ELF executable. A dynamically linked one or a file that is no program
// is refused by name instead of making a container that never starts.
func TestPrebuiltBinariesMustBeStatic(t *testing.T) {
	static, err := Static(context.Background(), "github.com/ringside/ringside/cmd/tokenring")
	require.NoError(t, err)
	dynamic, err := exec.LookPath("sh")
	require.NoError(t, err)

	dir := t.TempDir()
	t.Setenv(BinariesEnv, dir)
	put := func(from string) {
		b, err := os.ReadFile(from)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenring"), b, 0o755))
	}

	_, err = Static(context.Background(), "./cmd/tokenring")
	assert.ErrorContains(t, err, "no prebuilt tokenring")

	put(static)
	got, err := Static(context.Background(), "./cmd/tokenring")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "tokenring"), got)

	put(dynamic)
	_, err = Static(context.Background(), "./cmd/tokenring")
	assert.ErrorContains(t, err, "is dynamically linked (it asks for /lib")
	assert.ErrorContains(t, err, "CGO_ENABLED=0")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenring"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	_, err = Static(context.Background(), "./cmd/tokenring")
	assert.ErrorContains(t, err, "is not an ELF executable")
}
