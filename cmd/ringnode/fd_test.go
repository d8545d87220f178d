package main

import (
	"os"
	"testing"

	"github.com/ringside/ringside/internal/fdtest"
)

func TestMain(m *testing.M) {
	fdtest.RunChild(main)
	os.Exit(m.Run())
}

// Flooded with more connections than it may open files, ringnode keeps
// its process and serves again once the flood has gone (its accept loop
// returned on the first EMFILE, and the server never accepted again).
func TestOutlivesAConnectionFlood(t *testing.T) {
	fdtest.Check(t, []string{"RINGNODE_SECRET=0123456789abcdef"}, 1, "/healthz", func(a []string) []string {
		return []string{"--addr", a[0], "--data", t.TempDir(), "--log-level", "error"}
	})
}
