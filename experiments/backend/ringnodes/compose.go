package ringnodes

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ringside/ringside/compose"
	"github.com/ringside/ringside/internal/imagebuild"
)

// DefaultRingnodeImage is the image compose/ring.yml runs unless
// RINGNODE_IMAGE says otherwise.
const DefaultRingnodeImage = "ringside/ringnode:dev"

// ComposeOptions configure a compose ring.
type ComposeOptions struct {
	Env   []string // RINGNODE_* settings passed to compose/ring.yml
	Image string   // default DefaultRingnodeImage
	Log   *slog.Logger
}

// Compose is a ring of ringnode containers started from compose/ring.yml.
type Compose struct {
	project, file, dir string
	env                []string
	log                *slog.Logger
	mu                 sync.Mutex
	ids                map[string]string // addr → container id
	killed             []killedContainer
	nodes              int
}

// ComposeCommand returns docker-compose v1, or the v2 plugin when that is all
// there is.
func ComposeCommand(args ...string) *exec.Cmd {
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return exec.Command(p, args...)
	}
	return exec.Command("docker", append([]string{"compose"}, args...)...)
}

func run(ctx context.Context, cmd *exec.Cmd) (string, error) {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return out.String(), fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(errb.String()))
		}
		return out.String(), nil
	case <-ctx.Done():
		cmd.Process.Kill()
		<-done
		return "", ctx.Err()
	}
}

// EnsureImage builds the ringnode image FROM scratch unless it exists.
func EnsureImage(ctx context.Context, image string) error {
	return imagebuild.Ensure(ctx, image, "github.com/ringside/ringside/cmd/ringnode", compose.RingnodeDockerfile)
}

// StartCompose brings up a ring of n containers: one seed and n−1 nodes.
func StartCompose(ctx context.Context, n int, o ComposeOptions) (*Compose, error) {
	if n < 1 {
		return nil, fmt.Errorf("ring of %d servers", n)
	}
	if o.Image == "" {
		o.Image = DefaultRingnodeImage
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if err := EnsureImage(ctx, o.Image); err != nil {
		return nil, fmt.Errorf("ringnode image: %w", err)
	}
	dir, err := os.MkdirTemp("", "ringside-compose-")
	if err != nil {
		return nil, err
	}
	c := &Compose{
		project: fmt.Sprintf("ringside%d%d", os.Getpid(), time.Now().UnixNano()%100000),
		file:    filepath.Join(dir, "ring.yml"), dir: dir, log: o.Log, ids: map[string]string{},
		env: append(append(os.Environ(), "RINGNODE_IMAGE="+o.Image, "RINGNODE_SECRET="+NewSecret()), o.Env...),
	}
	if err := os.WriteFile(c.file, compose.Ring, 0o644); err != nil {
		return nil, err
	}
	if err := c.up(ctx, n-1); err != nil {
		c.Close()
		return nil, err
	}
	if err := WaitMembers(ctx, c.Addrs(), n); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Compose) compose(ctx context.Context, args ...string) (string, error) {
	cmd := ComposeCommand(append([]string{"-p", c.project, "-f", c.file}, args...)...)
	cmd.Env = c.env
	return run(ctx, cmd)
}

// up scales the node service to nodes containers and waits for them.
func (c *Compose) up(ctx context.Context, nodes int) error {
	if _, err := c.compose(ctx, "up", "-d", "--no-recreate", "--scale", fmt.Sprintf("node=%d", nodes)); err != nil {
		return err
	}
	c.mu.Lock()
	c.nodes = nodes
	c.mu.Unlock()
	if err := c.refresh(ctx); err != nil {
		return err
	}
	for _, a := range c.Addrs() {
		if err := WaitHealthy(ctx, a, nil); err != nil {
			return fmt.Errorf("container %s: %w", a, err)
		}
	}
	return nil
}

// refresh maps the project's running containers to their addresses.
func (c *Compose) refresh(ctx context.Context) error {
	out, err := run(ctx, exec.Command("docker", "ps", "-q", "--filter", "label=com.docker.compose.project="+c.project, "--filter", "label=ringside.role=ringnode"))
	if err != nil {
		return err
	}
	ids := strings.Fields(out)
	m := map[string]string{}
	if len(ids) > 0 {
		out, err = run(ctx, exec.Command("docker", append([]string{"inspect", "-f", "{{.Id}} {{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}"}, ids...)...))
		if err != nil {
			return err
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				m[f[1]+":7000"] = f[0]
			}
		}
	}
	c.mu.Lock()
	c.ids = m
	c.mu.Unlock()
	return nil
}

// Addrs lists the running servers' addresses, sorted.
func (c *Compose) Addrs() []string {
	c.refresh(context.Background())
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.ids))
	for a := range c.ids {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// Kill sends SIGKILL to the server's container.
func (c *Compose) Kill(ctx context.Context, addr string) error {
	c.mu.Lock()
	id := c.ids[addr]
	c.mu.Unlock()
	if id == "" {
		return fmt.Errorf("kill %s: no such container", addr)
	}
	if _, err := run(ctx, exec.Command("docker", "kill", "-s", "KILL", id)); err != nil {
		return err
	}
	c.mu.Lock()
	c.killed = append(c.killed, killedContainer{addr, id})
	c.mu.Unlock()
	return c.refresh(ctx)
}

type killedContainer struct{ addr, id string }

// Restart starts a killed container again; Docker usually gives it its
// old address back, and either way it rejoins.
func (c *Compose) Restart(ctx context.Context, addr string) error {
	c.mu.Lock()
	i := slices.IndexFunc(c.killed, func(k killedContainer) bool { return k.addr == addr })
	if i < 0 {
		c.mu.Unlock()
		return fmt.Errorf("restart %s: not killed here", addr)
	}
	id := c.killed[i].id
	c.killed = slices.Delete(c.killed, i, i+1)
	c.mu.Unlock()
	if _, err := run(ctx, exec.Command("docker", "start", id)); err != nil {
		return err
	}
	if err := c.refresh(ctx); err != nil {
		return err
	}
	for a, cid := range c.snapshot() {
		if cid == id {
			return WaitHealthy(ctx, a, nil)
		}
	}
	return fmt.Errorf("restart %s: container %s is not running", addr, id[:12])
}

func (c *Compose) snapshot() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]string, len(c.ids))
	for a, id := range c.ids {
		out[a] = id
	}
	return out
}

// Add scales the node service up by one.
func (c *Compose) Add(ctx context.Context) (string, error) {
	before := c.snapshot()
	c.mu.Lock()
	nodes := c.nodes + 1
	c.mu.Unlock()
	if err := c.up(ctx, nodes); err != nil {
		return "", err
	}
	for a := range c.snapshot() {
		if _, ok := before[a]; !ok {
			return a, nil
		}
	}
	return "", fmt.Errorf("add: no new container appeared")
}

// Close removes the project's containers and network.
func (c *Compose) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := c.compose(ctx, "down", "-v", "--remove-orphans", "-t", "1")
	os.RemoveAll(c.dir)
	return err
}
