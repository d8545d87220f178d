package k8s

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The kind shim (kindshim/docker) turns --privileged into what a kind node
// needs and this engine grants: every capability but CAP_SYS_RESOURCE, a
// writable cgroup tree and /dev/kmsg; `exec --privileged` runs with the
// container's capabilities; anything else passes through. It runs the
// real engine with the Debian base of `make base-images`. The cgroup tree
// is the host's, bind-mounted: the probe removes the group it makes.
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
		"grep CapEff /proc/self/status && d=/sys/fs/cgroup/cpu/ringside-probe-$(hostname) && mkdir $d && rmdir $d && test -c /dev/kmsg && echo ok")
	require.NoError(t, err, out)
	assert.Contains(t, out, "CapEff:\t0000003ffeffffff", "all capabilities but CAP_SYS_RESOURCE (bit 24)")
	assert.True(t, strings.HasSuffix(out, "ok"), out)

	id, err := docker("run", "-d", "--rm", "--privileged", image, "sleep", "60")
	require.NoError(t, err, id)
	defer docker("rm", "-f", id)
	out, err = docker("exec", "--privileged", id, "grep", "CapEff", "/proc/self/status")
	require.NoError(t, err, out)
	assert.Contains(t, out, "0000003ffeffffff")

	out, err = docker("version", "--format", "{{.Server.APIVersion}}")
	require.NoError(t, err, out)
	assert.NotEmpty(t, out, "other commands pass through")
}
