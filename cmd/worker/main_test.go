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
	fdtest.Check(t, nil, 1, "/healthz", func(a []string) []string { return []string{"--addr", a[0], "--log-level", "error"} })
}
