package compose_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/experiments/backend/ringnodes"
	"github.com/ringside/ringside/internal/dockerapi"
	"github.com/ringside/ringside/internal/imagebuild"
)

// stackExperiments covers each kind of backend the stack uses: compose
// (ringnode containers), docker (worker containers) and kube (the stack's
// API server), plus a simulated one.
const stackExperiments = "ring-failover,kube-reelection,lb-live,lb-efficiency"

// `docker compose up experiments` from the repository root, as a user runs
// it, with compose v2 and with docker-compose 1.29: the images build (1.29
// builds one service: see experimentsStack), the experiments run on the
// stack's backends and write their results, and down leaves nothing
// behind. The second run is interrupted mid-way by down, which must stop
// the experiments' own containers too.
func TestExperimentsStack(t *testing.T) {
	for _, v := range []string{ringnodes.ComposeV2, ringnodes.ComposeV1} {
		t.Run(v, func(t *testing.T) { experimentsStack(t, v) })
	}
}

type stack struct {
	t       *testing.T
	version string
	project string
	results string
	env     []string
	file    string
}

func newStack(t *testing.T, version string) *stack {
	root, err := imagebuild.ModuleRoot()
	require.NoError(t, err)
	s := &stack{t: t, version: version, project: fmt.Sprintf("rsstack%s%d", version, time.Now().UnixNano()%1e6),
		results: t.TempDir(), file: filepath.Join(root, "docker-compose.yml")}
	s.env = append(os.Environ(), "RINGSIDE_RESULTS="+s.results, "RINGSIDE_EXPERIMENTS="+stackExperiments,
		"RINGSIDE_REPS=1", "RINGSIDE_SEED=3")
	t.Cleanup(func() {
		s.compose("down", "--remove-orphans", "-t", "30")
		s.requireNothingLeft()
	})
	return s
}

func (s *stack) command(args ...string) *exec.Cmd {
	cmd := ringnodes.ComposeCommand(s.version, append([]string{"-p", s.project, "-f", s.file}, args...)...)
	cmd.Env = s.env
	return cmd
}

func (s *stack) compose(args ...string) (string, error) {
	b, err := s.command(args...).CombinedOutput()
	return string(b), err
}

// requireNothingLeft checks that no container, network or volume of the
// project, or started by its experiments, remains.
func (s *stack) requireNothingLeft() {
	t := s.t
	ctx := context.Background()
	cli, err := dockerapi.Connect(ctx)
	require.NoError(t, err)
	defer cli.Close()
	for _, label := range []string{"com.docker.compose.project=" + s.project, dockerapi.StackLabel + "=" + s.project} {
		f := client.Filters{}.Add("label", label)
		ctrs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		require.NoError(t, err)
		assert.Empty(t, ctrs.Items, "containers labelled %s", label)
		nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
		require.NoError(t, err)
		for _, n := range nets.Items {
			// A network left behind fails the test when it could be
			// removed; one the engine refuses to let go of with nothing
			// attached (dockerapi.ErrStuckNetwork, an engine bug) is told.
			err := dockerapi.RemoveNetwork(ctx, cli, n.ID, n.Name)
			if dockerapi.OnlyStuck(err) {
				t.Logf("network %s labelled %s: %v", n.Name, label, err)
				continue
			}
			t.Errorf("network %s labelled %s was left behind (removing it now: %v)", n.Name, label, err)
		}
		vols, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
		require.NoError(t, err)
		assert.Empty(t, vols.Items, "volumes labelled %s", label)
	}
}

func experimentsStack(t *testing.T, version string) {
	s := newStack(t, version)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	if version == ringnodes.ComposeV1 {
		// 1.29 builds with the engine's classic builder, which shares no
		// cache with BuildKit: compiling the whole stack again took 22 min
		// here. Its build path is exercised on one service (the Dockerfile
		// parsed whole, its ARGs, a Go build stage, a scratch image); the
		// stack runs on the images compose v2 built under the same names.
		out, err := s.compose("build", "etcd")
		require.NoError(t, err, "build: %s", out)
		s.interrupted(ctx)
		return
	}
	// Compose v2 builds every service but etcd, which 1.29 builds (above,
	// and make test's stack-images): the two builders share no cache, so
	// v2 building it too compiled etcd a second time in the middle of the
	// tests (.ci/run on a fresh machine: the compose tests 560 s, 328 s
	// without it). up runs on the image 1.29 built under the compose
	// file's name, or builds it when there is none.
	services, err := s.command("config", "--services").Output() // stdout: warnings go to stderr
	require.NoError(t, err, "config: %s", services)
	build := []string{"build"}
	for _, svc := range strings.Fields(string(services)) {
		if svc != "etcd" {
			build = append(build, svc)
		}
	}
	require.Greater(t, len(build), 2, "services: %s", services)
	out, err := s.compose(build...)
	require.NoError(t, err, "build: %s", out)
	up := s.command("up", "--exit-code-from", "experiments", "experiments")
	b, err := up.CombinedOutput()
	require.NoError(t, err, "up: %s", b)

	backends := map[string]string{"ring-failover": "compose", "kube-reelection": "kube", "lb-live": "docker", "lb-efficiency": "sim"}
	for name, backend := range backends {
		raw, err := os.ReadFile(filepath.Join(s.results, name+".meta.json"))
		require.NoError(t, err, "%s: %s", name, b)
		var meta struct {
			Backend   string `json:"backend"`
			GitCommit string `json:"git_commit"`
			Rows      int    `json:"rows"`
		}
		require.NoError(t, json.Unmarshal(raw, &meta))
		assert.Equal(t, backend, meta.Backend, name)
		assert.NotEqual(t, "unknown", meta.GitCommit, "%s: the image knows its commit", name)
		assert.Positive(t, meta.Rows, name)
		assert.FileExists(t, filepath.Join(s.results, name+".csv"))
	}
	assert.FileExists(t, filepath.Join(s.results, "report.md"))
	pngs, _ := filepath.Glob(filepath.Join(s.results, "*.png"))
	assert.NotEmpty(t, pngs)
	// Owned by the owner of the checkout, not by the container's root.
	var ref syscall.Stat_t
	require.NoError(t, syscall.Stat(filepath.Dir(s.file), &ref))
	require.NoError(t, filepath.Walk(s.results, func(p string, fi os.FileInfo, err error) error {
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		assert.Equal(t, [2]uint32{ref.Uid, ref.Gid}, [2]uint32{st.Uid, st.Gid}, p)
		return nil
	}))
	out, err = s.compose("down", "--remove-orphans")
	require.NoError(t, err, "down: %s", out)
	s.requireNothingLeft()

	// A failure fails the command, naming it (run passes the exit status
	// on; plain up exits 0 whatever its service did, on both versions).
	s.env = append(s.env, "RINGSIDE_EXPERIMENTS=ring-messages,nope")
	b, err = s.command("run", "--rm", "experiments").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(b), `unknown experiment "nope"`)
}

// interrupted starts the stack, waits until its experiments have started
// containers of their own, and takes it down mid-run.
func (s *stack) interrupted(ctx context.Context) {
	t := s.t
	// --no-build: an image missing here is a failure naming it, not a
	// silent 20-minute build (the v2 subtest, or make stack-images, made them).
	up := s.command("up", "--no-build", "experiments")
	var outb strings.Builder
	up.Stdout, up.Stderr = &outb, &outb
	require.NoError(t, up.Start())
	defer up.Wait()
	cli, err := dockerapi.Connect(ctx)
	require.NoError(t, err)
	defer cli.Close()
	require.Eventually(t, func() bool {
		ctrs, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: client.Filters{}.Add("label", dockerapi.StackLabel+"="+s.project)})
		return err == nil && len(ctrs.Items) > 0
	}, 10*time.Minute, time.Second, "the experiments start containers: %s", &outb)
	out, err := s.compose("down", "--remove-orphans")
	require.NoError(t, err, "down: %s", out)
	s.requireNothingLeft()
}
