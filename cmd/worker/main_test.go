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

// Flooded with more connections than it may open files, the worker keeps
// its process and serves again once the flood has gone.
func TestOutlivesAConnectionFlood(t *testing.T) {
	const limit = 64
	addr := fdtest.FreeAddr(t)
	p := fdtest.Start(t, limit, nil, "--addr", addr, "--log-level", "error")
	fdtest.Survives(t, p, limit, "http://"+addr+"/healthz", addr)
}
