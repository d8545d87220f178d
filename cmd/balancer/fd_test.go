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

// Flooded on its proxy and its admin port with more connections than it
// may open files, the balancer keeps its process (it exited with
// "accept4: too many open files") and serves again once the flood has
// gone.
func TestOutlivesAConnectionFlood(t *testing.T) {
	const limit = 64
	addr, admin := fdtest.FreeAddr(t), fdtest.FreeAddr(t)
	p := fdtest.Start(t, limit, nil, "--addr", addr, "--admin", admin, "--workers", "127.0.0.1:1=1", "--log-level", "error")
	fdtest.Survives(t, p, limit, "http://"+admin+"/healthz", addr, admin)
}
