package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A value the server cannot use stops it with the variable named, instead
// of falling back to a default the operator did not choose.
func TestMalformedEnvironmentIsAnError(t *testing.T) {
	for key, value := range map[string]string{
		"RINGNODE_SUSPECT":   "700", // no unit
		"RINGNODE_REPLICAS":  "two",
		"RINGNODE_CACHE_MIB": "lots",
	} {
		t.Run(key, func(t *testing.T) {
			t.Setenv(key, value)
			err := run(context.Background(), []string{"--data", t.TempDir()})
			require.ErrorContains(t, err, "environment "+key+`="`+value+`"`)
		})
	}
	t.Run("fsync policy", func(t *testing.T) {
		t.Setenv("RINGNODE_FSYNC", "sometimes")
		t.Setenv("RINGNODE_SECRET", "a-secret-of-16-chars")
		require.ErrorContains(t, run(context.Background(), []string{"--data", t.TempDir(), "--addr", "127.0.0.1:1"}), `fsync policy "sometimes"`)
	})
	t.Run("cache budget", func(t *testing.T) {
		t.Setenv("RINGNODE_CACHE_MIB", "-1")
		require.ErrorContains(t, run(context.Background(), []string{"--data", t.TempDir()}), "cache-mib -1")
	})
	t.Run("no secret", func(t *testing.T) {
		require.ErrorContains(t, run(context.Background(), []string{"--data", t.TempDir()}), "RINGNODE_SECRET")
	})
	t.Run("election", func(t *testing.T) {
		t.Setenv("RINGNODE_ELECTION", "raft")
		t.Setenv("RINGNODE_SECRET", "a-secret-of-16-chars")
		err := run(context.Background(), []string{"--data", t.TempDir(), "--addr", "127.0.0.1:1"})
		require.ErrorContains(t, err, `election algorithm "raft": want one of chang-roberts`)
	})
	t.Run("negative duration", func(t *testing.T) {
		// It used to start, join, and never elect: the state machine
		// refused the value only once the ring's metadata came.
		t.Setenv("RINGNODE_ACK_TIMEOUT", "-1s")
		t.Setenv("RINGNODE_SECRET", "a-secret-of-16-chars")
		err := run(context.Background(), []string{"--data", t.TempDir(), "--addr", "127.0.0.1:1"})
		require.ErrorContains(t, err, "ack timeout -1s: must not be negative")
	})
	t.Run("log level", func(t *testing.T) {
		t.Setenv("RINGNODE_LOG", "loud")
		require.ErrorContains(t, run(context.Background(), []string{"--data", t.TempDir()}), `log-level "loud"`)
	})
}
