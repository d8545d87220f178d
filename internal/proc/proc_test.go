package proc

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
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
	require.Eventually(t, p.Exited, 10*time.Second, time.Millisecond)
	require.True(t, closed, "onExit runs before Done closes")
	var ee *exec.ExitError
	require.ErrorAs(t, p.Err(), &ee)
	require.Equal(t, 3, ee.ExitCode())
}

func TestStopEscalatesToKill(t *testing.T) {
	// The shell ignores TERM, so Stop must fall back to SIGKILL.
	cmd := exec.Command("sh", "-c", "trap '' TERM; echo trapped; exec sleep 30")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p, err := Start(cmd, nil)
	require.NoError(t, err)
	require.False(t, p.Exited())
	require.NoError(t, p.Err(), "no error while running")
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "trapped\n", line, "the trap is installed")
	p.Stop(syscall.SIGTERM, 200*time.Millisecond)
	require.True(t, p.Exited())
	require.Error(t, p.Err())
	p.Signal(syscall.SIGTERM) // after exit: no-op, no panic
}

func TestStartErrorNamesTheBinary(t *testing.T) {
	_, err := Start(exec.Command("/nonexistent/ringside-bin"), nil)
	require.ErrorContains(t, err, "start ringside-bin")
}

func TestCPUCountsTheDescendants(t *testing.T) {
	// The shell only waits; its child (a grandchild of the test) burns a
	// core. Without the descendants the reading would stay near zero.
	cmd := exec.Command("sh", "-c", `sh -c 'while :; do :; done' & echo $!; wait`)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p, err := Start(cmd, nil)
	require.NoError(t, err)
	defer p.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	defer syscall.Kill(child, syscall.SIGKILL) // first: once the shell is gone, the child is init's
	require.Eventually(t, func() bool {
		used, err := p.CPU()
		return err == nil && used >= 200*time.Millisecond
	}, 30*time.Second, 20*time.Millisecond)

	require.NoError(t, syscall.Kill(child, syscall.SIGKILL))
	p.Kill()
	_, err = TreeCPU(p.Pid())
	require.ErrorContains(t, err, "not running")
}
