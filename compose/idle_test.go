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
// on CPU nothing else wants. As root (CI) it joins a cpu cgroup marked
// idle; elsewhere it runs at nice 19 only, which orders it only against its
// own session (and is all idle.sh can do there). In the cgroup, a busy loop
// under idle.sh and one beside it on the same CPU: the other gets the CPU,
// the idle one next to none of it. The test waits on nothing the idle
// process must do once it is in the cgroup: on a busy machine (CI) it may
// not run for seconds, which is the point.
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
	const group = "/ringside-idle\n"
	idle := spin("../tools/idle.sh")
	pid := idle.Process.Pid
	// idle.sh execs nice, nice execs taskset, taskset execs sh: one pid,
	// in the cgroup (joined at normal priority) or, without one, at nice 19.
	var cg []byte
	require.Eventually(t, func() bool {
		var err error
		cg, err = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
		_, nice := stat(pid)
		return err == nil && (strings.Contains(string(cg), group) || nice == 19)
	}, time.Minute, 10*time.Millisecond, "idle.sh joined no cgroup and set no nice")
	if !strings.Contains(string(cg), group) {
		require.NotZero(t, os.Geteuid(), "root, and not in idle.sh's cgroup:\n%s", cg)
		return
	}
	// The cgroup idle.sh joined, chosen as it chooses (its /proc line
	// reads cpu,cpuacct: where v1 mounts the two together).
	dir := "/sys/fs/cgroup/ringside-idle"
	if fi, err := os.Stat("/sys/fs/cgroup/cpu"); err == nil && fi.IsDir() {
		dir = "/sys/fs/cgroup/cpu/ringside-idle"
	}
	idleFile, err := os.ReadFile(dir + "/cpu.idle")
	if err == nil {
		assert.Equal(t, "1", strings.TrimSpace(string(idleFile)), dir+"/cpu.idle")
	}

	// Both loops on CPU 0 (the idle one once it reaches taskset); once the
	// busy one has had two seconds of it, the idle one has had a sliver
	// (SCHED_IDLE's weight is 3 against 1024; a cgroup of cpu.shares 2
	// gets 2 against 1024).
	idle0, _ := stat(pid)
	busy := spin()
	require.Eventually(t, func() bool {
		cpu, _ := stat(busy.Process.Pid)
		return cpu >= 2*time.Second
	}, 2*time.Minute, 50*time.Millisecond, "the busy loop never got two seconds of CPU")
	idleCPU, _ := stat(pid)
	idleCPU -= idle0
	busyCPU, _ := stat(busy.Process.Pid)
	assert.Less(t, idleCPU, busyCPU/10, "under idle.sh %v of CPU, beside it %v", idleCPU, busyCPU)
}
