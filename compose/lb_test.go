package compose_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/agent"
	"github.com/ringside/ringside/compose"
	"github.com/ringside/ringside/experiments/backend/ringnodes"
	"github.com/ringside/ringside/internal/imagebuild"
)

// compose/lb.yml brought up as a user would, with docker-compose 1.29 and
// with compose v2: Redis, agent, balancer and the two default workers; requests through the balancer reach both workers,
// the agent's dashboard data shows them and the connected balancer.
func TestLBStackUp(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"agent", "balancer", "worker"} {
		require.NoError(t, imagebuild.Build(ctx, "ringside/"+name+":test", "github.com/ringside/ringside/cmd/"+name))
	}
	// The Redis of lb.yml's default, made here by make base-images.
	out, err := exec.Command("docker", "image", "inspect", "redis:7-bookworm").CombinedOutput()
	require.NoError(t, err, "redis:7-bookworm is missing (make base-images): %s", out)
	for _, v := range []string{ringnodes.ComposeV1, ringnodes.ComposeV2} {
		t.Run(v, func(t *testing.T) { lbStack(t, v) })
	}
}

func lbStack(t *testing.T, version string) {
	id := fmt.Sprintf("lbt%d", time.Now().UnixNano()%1e6)
	dir := t.TempDir()
	file := filepath.Join(dir, "lb.yml")
	require.NoError(t, os.WriteFile(file, compose.LB, 0o644))
	env := append(os.Environ(), "AGENT_IMAGE=ringside/agent:test",
		"BALANCER_IMAGE=ringside/balancer:test", "WORKER_IMAGE=ringside/worker:test", "LB_POOL="+id, "LB_NETWORK="+id,
		"AGENT_PORT=0", "BALANCER_PORT=0", "AGENT_TOKEN=t0ken", "REDIS_PASSWORD=r3dis-pass")
	dc := func(args ...string) (string, error) {
		cmd := ringnodes.ComposeCommand(version, append([]string{"-p", id, "-f", file}, args...)...)
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	// No default secret: without AGENT_TOKEN the file does not start.
	tokenless := slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "AGENT_TOKEN=") })
	cmd := ringnodes.ComposeCommand(version, "-p", id, "-f", file, "config")
	cmd.Env = tokenless
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "AGENT_TOKEN")

	t.Cleanup(func() {
		dc("down", "-t", "2")
		ids, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=ringside.pool="+id).Output()
		for _, c := range strings.Fields(string(ids)) {
			exec.Command("docker", "rm", "-f", c).Run()
		}
		exec.Command("docker", "network", "rm", id).Run()
	})
	out2, err := dc("up", "-d")
	require.NoError(t, err, out2)
	port := func(svc, p string) string {
		o, err := dc("port", svc, p)
		require.NoError(t, err, o)
		hp := strings.TrimSpace(o)
		return "127.0.0.1:" + hp[strings.LastIndex(hp, ":")+1:]
	}
	lb, ag := port("balancer", "8080"), port("agent", "8081")

	seen := map[string]int{}
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + lb + "/work?cost=1000")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusOK {
			seen[strings.Fields(string(b))[0]]++
		}
		return len(seen) == 2
	}, 60*time.Second, 50*time.Millisecond, "requests through the balancer reach both default workers")

	var v agent.View
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + ag + "/api/state")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if json.NewDecoder(resp.Body).Decode(&v) != nil {
			return false
		}
		return len(v.Workers) == 2 && v.Balancers == 1
	}, 30*time.Second, 100*time.Millisecond)
	for _, w := range v.Workers {
		assert.True(t, w.Default, "%s is a default worker", w.Name)
		assert.Contains(t, []float64{0.5, 1}, w.CPULimit)
	}
	// The agent keeps its state in the stack's Redis: restarted, it resumes.
	o, err := dc("restart", "-t", "2", "agent")
	require.NoError(t, err, o)
	require.Eventually(t, func() bool {
		logs, _ := dc("logs", "agent")
		return strings.Contains(logs, "agent resumed from store") && strings.Contains(logs, "workers=2")
	}, 30*time.Second, 200*time.Millisecond)
	logs, _ := dc("logs", "agent")
	assert.NotContains(t, logs, "save state to redis")
	// Redis asks for the password, which no command line shows.
	o, err = dc("exec", "-T", "redis", "redis-cli", "ping")
	assert.Contains(t, o, "NOAUTH", "redis without the password: %v", err)
	ps, err := exec.Command("docker", "ps", "--no-trunc", "--filter", "label=com.docker.compose.project="+id, "--format", "{{.Command}}").Output()
	require.NoError(t, err)
	assert.NotContains(t, string(ps), "r3dis-pass")
	top, _ := dc("top")
	assert.NotContains(t, top, "r3dis-pass")
}
