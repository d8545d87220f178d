package proc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestExitIsReportedOnceAndRaceFree(t *testing.T) {
	closed := false
	p, err := Start(exec.Command("sh", "-c", "exit 3"), func() { closed = true })
	require.NoError(t, err)
	// Polled from this goroutine while the waiter writes: -race checks it.
	for !p.Exited() {
		time.Sleep(time.Millisecond)
	}
	require.True(t, closed, "onExit runs before Done closes")
	var ee *exec.ExitError
	require.ErrorAs(t, p.Err(), &ee)
	require.Equal(t, 3, ee.ExitCode())
}

func TestStopEscalatesToKill(t *testing.T) {
	// The shell ignores TERM, so Stop must fall back to SIGKILL.
	p, err := Start(exec.Command("sh", "-c", "trap '' TERM; sleep 30"), nil)
	require.NoError(t, err)
	require.False(t, p.Exited())
	require.NoError(t, p.Err(), "no error while running")
	time.Sleep(100 * time.Millisecond) // let the trap be installed
	p.Stop(syscall.SIGTERM, 200*time.Millisecond)
	require.True(t, p.Exited())
	require.Error(t, p.Err())
	p.Signal(syscall.SIGTERM) // after exit: no-op, no panic
}

func TestStartErrorNamesTheBinary(t *testing.T) {
	_, err := Start(exec.Command("/nonexistent/ringside-bin"), nil)
	require.ErrorContains(t, err, "start ringside-bin")
}
