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

// A busy process in a group limited to a quarter CPU uses at most about a
// quarter of the wall time (less when the machine is busy), and the group
// measures what it used.
func TestLimitAndUsage(t *testing.T) {
	if os.Geteuid() != 0 {
		require.Empty(t, os.Getenv("CI"), "CI runs the tests as root")
		t.Skip("cgroups need root")
	}
	g, err := New(fmt.Sprintf("ringside-test/%d", os.Getpid()), 0.25)
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
	time.Sleep(time.Second)
	u1, err := g.Usage()
	require.NoError(t, err)
	used := (u1 - u0).Seconds()
	assert.Positive(t, used)
	assert.LessOrEqual(t, used, 0.32, "CPU seconds in one second at a 0.25 limit")
}

func TestBadLimitsAreRefused(t *testing.T) {
	for _, c := range []float64{0, -1, 2000} {
		_, err := New("x", c)
		assert.ErrorContains(t, err, "cpu limit")
	}
	_, err := New("../escape", 1)
	assert.ErrorContains(t, err, "without ..")
}
