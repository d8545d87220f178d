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

// Flooded with more connections than it may open files, a replica keeps
// its process and serves again once the flood has gone.
func TestOutlivesAConnectionFlood(t *testing.T) {
	const limit = 64
	addr := fdtest.FreeAddr(t)
	p := fdtest.Start(t, limit, []string{"APP_SECRET=0123456789abcdef"}, "--addr", addr, "--name", "a", "--peers", "a=http://"+addr,
		"--sidecar", "http://127.0.0.1:1", "--log-level", "error")
	fdtest.Survives(t, p, limit, "http://"+addr+"/role", addr)
}
