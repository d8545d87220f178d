package compose

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tools/idle.sh runs .ci/run's race compiles beside the tools and images
// on CPU nothing else wants. Two busy loops on one CPU, one of them under
// idle.sh: the other gets the CPU, the idle one next to none of it. As root
// (CI) the idle one is in the cpu cgroup idle.sh makes; elsewhere at nice
// 19, which orders it only against its own session (and is all idle.sh can
// do there), so the share is checked only where the cgroup is.
func TestIdleTakesOnlyIdleCPU(t *testing.T) {
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Fatalf("taskset (util-linux) is needed: %v", err)
	}
	spin := func(prefix ...string) *exec.Cmd {
		args := append(append([]string{}, prefix...), "taskset", "-c", "0", "sh", "-c", "while :; do :; done")
		cmd := exec.Command(args[0], args[1:]...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Logf("%s: %s", strings.Join(prefix, " "), stderr.String())
		})
		return cmd
	}
	idle := spin("../tools/idle.sh")
	busy := spin()

	// idle.sh execs nice, nice execs taskset, taskset execs sh: one pid.
	require.Eventually(t, func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(idle.Process.Pid) + "/comm")
		return err == nil && strings.TrimSpace(string(b)) == "sh"
	}, 10*time.Second, 10*time.Millisecond, "idle.sh never ran its command")
	stat := func(pid int) (cpu time.Duration, nice int) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		require.NoError(t, err)
		// The fields after the command's name, which ends with ") ".
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		utime, err := strconv.Atoi(f[11])
		require.NoError(t, err)
		stime, err := strconv.Atoi(f[12])
		require.NoError(t, err)
		nice, err = strconv.Atoi(f[16])
		require.NoError(t, err)
		return time.Duration(utime+stime) * 10 * time.Millisecond, nice // USER_HZ 100
	}
	_, nice := stat(idle.Process.Pid)
	assert.Equal(t, 19, nice)

	cg, err := os.ReadFile("/proc/" + strconv.Itoa(idle.Process.Pid) + "/cgroup")
	require.NoError(t, err)
	inGroup := strings.Contains(string(cg), "/ringside-idle\n")
	if os.Geteuid() == 0 {
		require.True(t, inGroup, "root, and not in idle.sh's cgroup:\n%s", cg)
	}
	if !inGroup {
		return
	}
	// Both loops ran on CPU 0 from the start; once the busy one has had
	// two seconds of it, the idle one has had a sliver (SCHED_IDLE's
	// weight is 3 against 1024; a cgroup of cpu.shares 2 gets 2 against
	// 1024).
	require.Eventually(t, func() bool {
		cpu, _ := stat(busy.Process.Pid)
		return cpu >= 2*time.Second
	}, 2*time.Minute, 50*time.Millisecond, "the busy loop never got two seconds of CPU")
	idleCPU, _ := stat(idle.Process.Pid)
	busyCPU, _ := stat(busy.Process.Pid)
	assert.Less(t, idleCPU, busyCPU/10, "under idle.sh %v of CPU, beside it %v", idleCPU, busyCPU)
}
