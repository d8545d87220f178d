package k8s

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The kind shim (kindshim/docker) turns --privileged into what a kind node
// needs and this engine grants: every capability but CAP_SYS_RESOURCE,
// the container's own cgroup tree, which it can make writable, every
// device in its device cgroup, and /dev/kmsg; `exec --privileged` runs with the container's capabilities;
// anything else passes through. It runs the real engine with the Debian
// base of `make base-images`.
func TestKindShimGrantsWhatPrivilegedWould(t *testing.T) {
	shim, err := filepath.Abs("kindshim")
	require.NoError(t, err)
	docker := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(shim, "docker"), args...)
		cmd.Env = append(os.Environ(), "PATH="+shim+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	const image = "debian:bookworm-slim"
	out, err := docker("run", "--rm", "--privileged", "--cgroupns=private", image, "sh", "-c",
		"grep CapEff /proc/self/status && cat /sys/fs/cgroup/devices/devices.list && test -c /dev/kmsg && echo ok")
	require.NoError(t, err, out)
	assert.Contains(t, out, "CapEff:\t0000003ffeffffff", "all capabilities but CAP_SYS_RESOURCE (bit 24)")
	assert.Contains(t, out, "\na *:* rwm\n", "every device: a privileged pod's runc allows them all")
	assert.True(t, strings.HasSuffix(out, "ok"), out)

	// The group a node makes after remounting its tree (as k8s/node's
	// entrypoint does) lands inside the container's own group on the
	// host, never at the host's root.
	probe := fmt.Sprintf("ringside-probe-%d", os.Getpid())
	id, err := docker("run", "-d", "--rm", "--privileged", "--cgroupns=private", image, "sh", "-c",
		"mount -o remount,bind,rw /sys/fs/cgroup/cpu && mkdir /sys/fs/cgroup/cpu/"+probe+" && sleep 60")
	require.NoError(t, err, id)
	defer docker("rm", "-f", id)
	var made []string
	require.Eventually(t, func() bool {
		made, _ = filepath.Glob("/sys/fs/cgroup/cpu/*/*/" + probe)
		more, _ := filepath.Glob("/sys/fs/cgroup/cpu/*/" + probe)
		made = append(made, more...)
		return len(made) > 0
	}, 10*time.Second, 100*time.Millisecond, "the node's group was not made")
	defer docker("exec", id, "rmdir", "/sys/fs/cgroup/cpu/"+probe)
	assert.NoDirExists(t, "/sys/fs/cgroup/cpu/"+probe, "made at the host's root")
	require.Len(t, made, 1)
	assert.Contains(t, filepath.Dir(made[0]), id, "not inside the container's group")

	out, err = docker("exec", "--privileged", id, "grep", "CapEff", "/proc/self/status")
	require.NoError(t, err, out)
	assert.Contains(t, out, "0000003ffeffffff")

	out, err = docker("version", "--format", "{{.Server.APIVersion}}")
	require.NoError(t, err, out)
	assert.NotEmpty(t, out, "other commands pass through")
}
