package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A balancer listening on every interface is, to the feed, any of this
// host's addresses with its port: each is refused as a worker.
func TestSelfAddrs(t *testing.T) {
	got := selfAddrs(":8080", "127.0.0.1:9090")
	assert.Contains(t, got, ":8080")
	assert.Contains(t, got, "127.0.0.1:8080", "the loopback interface's address, with the proxy's port")
	assert.Contains(t, got, "127.0.0.1:9090")
	assert.NotContains(t, got, "127.0.0.1:7000")
}

// An unknown front, by flag or environment, is refused by name, with the
// ones there are.
func TestUnknownFrontRefused(t *testing.T) {
	err := run(t.Context(), []string{"--workers", "127.0.0.1:1=1", "--addr", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--front", "gnet"})
	assert.ErrorContains(t, err, `--front "gnet": want one of fasthttp, conn, net/http`)
	t.Setenv("BALANCER_FRONT", "fast http")
	err = run(t.Context(), []string{"--workers", "127.0.0.1:1=1", "--addr", "127.0.0.1:0", "--admin", "127.0.0.1:0"})
	assert.ErrorContains(t, err, `--front "fast http": want one of`, "the environment's value is refused the same way")
}
