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

// Flooded with more connections than it may open files, the agent keeps
// its process and serves again once the flood has gone.
func TestOutlivesAConnectionFlood(t *testing.T) {
	fdtest.Check(t, []string{"AGENT_TOKEN=0123456789abcdef"}, 1, "/healthz", func(a []string) []string {
		return []string{"--http", a[0], "--runtime", "process", "--worker-bin", "/nonexistent/worker", "--min", "0", "--log-level", "error"}
	})
}
