package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// The results a root container wrote go to the owner of the checkout.
func TestChownLikeGivesResultsToTheCheckoutOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		require.Empty(t, os.Getenv("CI"), "CI runs the tests as root")
		t.Skip("chown to another user needs root")
	}
	ref, out := t.TempDir(), t.TempDir()
	require.NoError(t, os.Chown(ref, 12345, 23456))
	require.NoError(t, os.MkdirAll(filepath.Join(out, "sub"), 0o755))
	for _, f := range []string{"a.csv", "sub/b.png"} {
		require.NoError(t, os.WriteFile(filepath.Join(out, f), []byte("x"), 0o644))
	}
	require.NoError(t, chownLike(out, ref))
	for _, p := range []string{out, filepath.Join(out, "a.csv"), filepath.Join(out, "sub"), filepath.Join(out, "sub/b.png")} {
		st, err := os.Stat(p)
		require.NoError(t, err)
		sys := st.Sys().(*syscall.Stat_t)
		require.Equal(t, [2]uint32{12345, 23456}, [2]uint32{sys.Uid, sys.Gid}, p)
	}
	require.ErrorContains(t, chownLike(out, filepath.Join(ref, "missing")), "results owner")
}
