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
	for _, front := range fronts {
		t.Run(front, func(t *testing.T) {
			fdtest.Check(t, nil, 2, "/healthz", func(a []string) []string {
				return []string{"--addr", a[0], "--admin", a[1], "--workers", "127.0.0.1:1=1", "--log-level", "error", "--front", front}
			})
		})
	}
}
