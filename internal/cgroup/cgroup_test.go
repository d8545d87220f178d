package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A busy process in a group limited to a quarter CPU uses at most a
// quarter of each CFS period it runs in, and the kernel throttles it: both
// read from the kernel's own accounting (cpu.stat's periods, the group's
// usage), so a loaded machine — which only gives it less — cannot fail it.
func TestLimitAndUsage(t *testing.T) {
	if os.Geteuid() != 0 {
		require.Empty(t, os.Getenv("CI"), "CI runs the tests as root")
		t.Skip("cgroups need root")
	}
	const cpus = 0.25
	g, err := New(fmt.Sprintf("ringside-test/%d", os.Getpid()), cpus)
	require.NoError(t, err)
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	require.NoError(t, cmd.Start())
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		require.NoError(t, g.Remove())
		RemoveEmpty("ringside-test") // shared parent; another run may still use it
	}()
	require.NoError(t, g.Add(cmd.Process.Pid))
	u0, err := g.Usage()
	require.NoError(t, err)
	t0, err := g.Throttling()
	require.NoError(t, err)
	var t1 Throttling
	require.Eventually(t, func() bool {
		t1, err = g.Throttling()
		require.NoError(t, err)
		return t1.Periods-t0.Periods >= 10 && t1.Throttled > t0.Throttled
	}, time.Minute, 20*time.Millisecond, "ten periods with the group runnable, and a throttled one")
	u1, err := g.Usage()
	require.NoError(t, err)
	t2, err := g.Throttling()
	require.NoError(t, err)
	used := u1 - u0
	assert.Positive(t, used)
	// Every period between the readings counts, plus the two partial
	// ones at either end.
	periods := t2.Periods - t0.Periods + 2
	bound := time.Duration(float64(periods) * cpus * float64(period*time.Microsecond))
	assert.LessOrEqual(t, used, bound, "CPU time over %d periods at a %v-CPU limit", periods, cpus)
}

func TestBadLimitsAreRefused(t *testing.T) {
	for _, c := range []float64{0, -1, 2000} {
		_, err := New("x", c)
		assert.ErrorContains(t, err, "cpu limit")
	}
	_, err := New("../escape", 1)
	assert.ErrorContains(t, err, "without ..")
}
