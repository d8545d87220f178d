package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A value the server cannot use stops it with the variable named, instead
// of falling back to a default the operator did not choose.
func TestMalformedEnvironmentIsAnError(t *testing.T) {
	for key, value := range map[string]string{
		"RINGNODE_SUSPECT":       "700", // no unit
		"RINGNODE_REPLICAS":      "two",
		"RINGNODE_CACHE_MIB":     "lots",
		"RINGNODE_TIMER_SLACK":   "1", // no unit
		"RINGNODE_MONITOR_AWAKE": "maybe",
		"RINGNODE_SPIN_READ":     "2", // no unit
	} {
		t.Run(key, func(t *testing.T) {
			t.Setenv(key, value)
			err := run(context.Background(), []string{"--data", t.TempDir()}, keepSlack)
			require.ErrorContains(t, err, "environment "+key+`="`+value+`"`)
		})
	}
	t.Run("fsync policy", func(t *testing.T) {
		t.Setenv("RINGNODE_FSYNC", "sometimes")
		t.Setenv("RINGNODE_SECRET", "a-secret-of-16-chars")
		require.ErrorContains(t, run(context.Background(), []string{"--data", t.TempDir(), "--addr", "127.0.0.1:1"}, keepSlack), `fsync policy "sometimes"`)
	})
	t.Run("cache budget", func(t *testing.T) {
		t.Setenv("RINGNODE_CACHE_MIB", "-1")
		require.ErrorContains(t, run(context.Background(), []string{"--data", t.TempDir()}, keepSlack), "cache-mib -1")
	})
	t.Run("no secret", func(t *testing.T) {
		require.ErrorContains(t, run(context.Background(), []string{"--data", t.TempDir()}, keepSlack), "RINGNODE_SECRET")
	})
	t.Run("election", func(t *testing.T) {
		t.Setenv("RINGNODE_ELECTION", "raft")
		t.Setenv("RINGNODE_SECRET", "a-secret-of-16-chars")
		err := run(context.Background(), []string{"--data", t.TempDir(), "--addr", "127.0.0.1:1"}, keepSlack)
		require.ErrorContains(t, err, `election algorithm "raft": want one of chang-roberts`)
	})
	t.Run("negative duration", func(t *testing.T) {
		// It used to start, join, and never elect: the state machine
		// refused the value only once the ring's metadata came.
		t.Setenv("RINGNODE_ACK_TIMEOUT", "-1s")
		t.Setenv("RINGNODE_SECRET", "a-secret-of-16-chars")
		err := run(context.Background(), []string{"--data", t.TempDir(), "--addr", "127.0.0.1:1"}, keepSlack)
		require.ErrorContains(t, err, "ack timeout -1s: must not be negative")
	})
	t.Run("spin read", func(t *testing.T) {
		t.Setenv("RINGNODE_SECRET", "a-secret-of-16-chars")
		for v, want := range map[string]string{"6ms": "spin read 6ms: at most 5ms", "-1ms": "spin read -1ms: must not be negative"} {
			t.Setenv("RINGNODE_SPIN_READ", v)
			require.ErrorContains(t, run(context.Background(), []string{"--data", t.TempDir(), "--addr", "127.0.0.1:1"}, keepSlack), want)
		}
	})
	t.Run("timer slack", func(t *testing.T) {
		for _, v := range []string{"6ms", "-1ns"} {
			t.Setenv("RINGNODE_TIMER_SLACK", v)
			require.ErrorContains(t, run(context.Background(), []string{"--data", t.TempDir()}, keepSlack), "timer-slack "+v+": want 0 (as inherited) to 5ms")
		}
	})
	t.Run("log level", func(t *testing.T) {
		t.Setenv("RINGNODE_LOG", "loud")
		require.ErrorContains(t, run(context.Background(), []string{"--data", t.TempDir()}, keepSlack), `log-level "loud"`)
	})
}

// keepSlack stands in for timerslack.Apply, which would execute the test
// binary again.
func keepSlack(time.Duration, bool) error { return nil }

// The server asks for the slack and the monitor setting it was given,
// before it starts anything; the monitor stays awake unless told not to.
func TestTimerSlackIsAskedForFirst(t *testing.T) {
	type tuning struct {
		slack time.Duration
		awake bool
	}
	var got []tuning
	t.Setenv("RINGNODE_FSYNC", "sometimes") // stops it at the server's start
	for _, c := range []struct {
		slack, awake string
		want         tuning
	}{{"", "", tuning{time.Millisecond, true}}, {"0", "false", tuning{0, false}}, {"250us", "true", tuning{250 * time.Microsecond, true}}} {
		t.Setenv("RINGNODE_SECRET", "a-secret-of-16-chars") // read once, then unset
		if c.slack != "" {
			t.Setenv("RINGNODE_TIMER_SLACK", c.slack)
		}
		if c.awake != "" {
			t.Setenv("RINGNODE_MONITOR_AWAKE", c.awake)
		}
		err := run(context.Background(), []string{"--data", t.TempDir(), "--addr", "127.0.0.1:1"}, func(d time.Duration, awake bool) error {
			got = append(got, tuning{d, awake})
			return nil
		})
		require.ErrorContains(t, err, "fsync policy")
		require.Equal(t, c.want, got[len(got)-1], c.slack)
	}
}
