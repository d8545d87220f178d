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
	fdtest.Check(t, []string{"APP_SECRET=0123456789abcdef"}, 1, "/role", func(a []string) []string {
		return []string{"--addr", a[0], "--name", "a", "--peers", "a=http://" + a[0], "--sidecar", "http://127.0.0.1:1", "--log-level", "error"}
	})
}
