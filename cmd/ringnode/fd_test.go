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
	const limit = 64
	addr := fdtest.FreeAddr(t)
	p := fdtest.Start(t, limit, []string{"RINGNODE_SECRET=0123456789abcdef"}, "--addr", addr, "--data", t.TempDir(), "--log-level", "error")
	fdtest.Survives(t, p, limit, "http://"+addr+"/healthz", addr)
}
