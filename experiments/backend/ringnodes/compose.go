package ringnodes

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/ringside/ringside/compose"
	"github.com/ringside/ringside/internal/dockerapi"
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
	// Compose is ComposeV1 or ComposeV2 ("": see ComposeCommand).
	Compose string
}

// Compose is a ring of ringnode containers started from compose/ring.yml.
type Compose struct {
	cli          *client.Client
	leave        func() // the runner's container leaves the ring's network
	project, dir string
	version      string   // compose implementation
	files        []string // ring.yml and the subnet override
	env          []string
	log          *slog.Logger
	mu           sync.Mutex
	ids          map[string]string // addr → container id
	refreshed    time.Time
	killed       []killedContainer
	nodes        int
}

// Compose implementations: Debian's docker-compose 1.29 and the docker
// CLI plugin of compose v2 (built by make compose-v2).
const (
	ComposeV1 = "v1"
	ComposeV2 = "v2"
)

// ComposeCommand runs compose version (ComposeV1 or ComposeV2; "" takes
// $RINGSIDE_COMPOSE, else v1 when it is installed, else v2).
func ComposeCommand(version string, args ...string) *exec.Cmd {
	if version == "" {
		version = os.Getenv("RINGSIDE_COMPOSE")
	}
	if version == "" {
		version = ComposeV2
		if _, err := exec.LookPath("docker-compose"); err == nil {
			version = ComposeV1
		}
	}
	if version == ComposeV1 {
		return exec.Command("docker-compose", args...)
	}
	// v2 as the docker CLI plugin, or standalone where there is no docker
	// CLI (the experiments image).
	if _, err := exec.LookPath("docker"); err != nil {
		return exec.Command("docker-compose", args...)
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

// built holds the images this process has built: each is built from the
// checkout once (never an image left from older code), then reused.
var built sync.Map

// EnsureImage builds the ringnode image FROM scratch from this checkout,
// once per process.
func EnsureImage(ctx context.Context, image string) error {
	if _, ok := built.Load(image); ok {
		return nil
	}
	if err := imagebuild.Build(ctx, image, "github.com/ringside/ringside/cmd/ringnode"); err != nil {
		return err
	}
	built.Store(image, true)
	return nil
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
	cli, err := dockerapi.Connect(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ringside-compose-")
	if err != nil {
		cli.Close()
		return nil, err
	}
	c := &Compose{
		cli: cli, project: fmt.Sprintf("ringside%d%d", os.Getpid(), time.Now().UnixNano()%100000),
		files: []string{filepath.Join(dir, "ring.yml"), filepath.Join(dir, "subnet.yml")}, dir: dir, version: o.Compose, log: o.Log, ids: map[string]string{},
		env: append(append(os.Environ(), "RINGNODE_IMAGE="+o.Image, "RINGNODE_SECRET="+NewSecret()), o.Env...),
	}
	if err := os.WriteFile(c.files[0], compose.Ring, 0o644); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.upOnOwnSubnet(ctx, n-1); err != nil {
		c.Close()
		return nil, err
	}
	if err := WaitMembers(ctx, c.Addrs(), n); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// upOnOwnSubnet brings the ring up on a network with a subnet of its own:
// Docker gives a container its address back on reconnect (Partition) only
// on a network whose subnet was configured. An override file beside
// compose/ring.yml sets it, so the file users run stays as it is; a
// subnet another network holds is tried again with the next one.
func (c *Compose) upOnOwnSubnet(ctx context.Context, nodes int) error {
	override := c.files[1]
	start := int(time.Now().UnixNano() % 200)
	var err error
	for i := range 8 {
		subnet := fmt.Sprintf("10.213.%d.0/24", (start+i*29)%250)
		yml := "networks:\n  default:\n    ipam:\n      config:\n        - subnet: " + subnet + "\n"
		if err := os.WriteFile(override, []byte(yml), 0o644); err != nil {
			return err
		}
		if err = c.up(ctx, nodes); err == nil || !strings.Contains(err.Error(), "overlap") {
			return err
		}
		c.compose(ctx, "down", "-v", "--remove-orphans", "-t", "1")
	}
	return err
}

func (c *Compose) compose(ctx context.Context, args ...string) (string, error) {
	var files []string
	for _, f := range c.files {
		files = append(files, "-f", f)
	}
	cmd := ComposeCommand(c.version, append(append([]string{"-p", c.project}, files...), args...)...)
	cmd.Env = c.env
	return run(ctx, cmd)
}

// up scales the node service to nodes containers and waits for them.
func (c *Compose) up(ctx context.Context, nodes int) error {
	if _, err := c.compose(ctx, "up", "-d", "--no-recreate", "--scale", fmt.Sprintf("node=%d", nodes)); err != nil {
		return err
	}
	// Run from a container (the experiments stack), ringside reaches the
	// servers by address only on their network: join it once it exists.
	if c.leave == nil {
		leave, err := dockerapi.Join(ctx, c.cli, c.project+"_default")
		if err != nil {
			return err
		}
		c.leave = leave
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
	res, err := c.cli.ContainerList(ctx, client.ContainerListOptions{Filters: client.Filters{}.
		Add("label", "com.docker.compose.project="+c.project).Add("label", "ringside.role=ringnode")})
	if err != nil {
		return fmt.Errorf("list the ring's containers: %w", err)
	}
	m := map[string]string{}
	for _, ctr := range res.Items {
		if ctr.NetworkSettings == nil {
			continue
		}
		for _, n := range ctr.NetworkSettings.Networks {
			if n != nil && n.IPAddress.IsValid() {
				m[n.IPAddress.String()+":7000"] = ctr.ID
			}
		}
	}
	c.mu.Lock()
	c.ids, c.refreshed = m, time.Now()
	c.mu.Unlock()
	return nil
}

// Addrs lists the running servers' addresses, sorted. Kill, Restart, Add
// and Partition refresh the list themselves; otherwise it is asked of the
// engine at most every 250 ms, so clients may call Addrs per request.
func (c *Compose) Addrs() []string {
	c.mu.Lock()
	stale := time.Since(c.refreshed) > 250*time.Millisecond
	c.mu.Unlock()
	if stale {
		c.refresh(context.Background())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.ids))
}

// Kill sends SIGKILL to the server's container.
func (c *Compose) Kill(ctx context.Context, addr string) error {
	c.mu.Lock()
	id := c.ids[addr]
	c.mu.Unlock()
	if id == "" {
		return fmt.Errorf("kill %s: no such container", addr)
	}
	// Recorded as killed before the call and the call not cancelled with
	// ctx: a request cancelled in flight may still have been carried out,
	// and a container killed but not recorded is never restarted. (A
	// nemesis's context ends while it injects a fault; the ring then did
	// not heal.) Restarting one the kill missed is harmless.
	c.mu.Lock()
	c.killed = append(c.killed, killedContainer{addr, id})
	c.mu.Unlock()
	if _, err := c.cli.ContainerKill(context.WithoutCancel(ctx), id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("kill %s: %w", addr, err)
	}
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
	if _, err := c.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("restart %s: %w", addr, err)
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
	return maps.Clone(c.ids)
}

// Down lists the servers killed and not yet restarted.
func (c *Compose) Down() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.killed))
	for i, k := range c.killed {
		out[i] = k.addr
	}
	return out
}

// Pause freezes the server's container (docker pause, the cgroup
// freezer) for d, then thaws it: a frozen machine to its peers.
func (c *Compose) Pause(ctx context.Context, addr string, d time.Duration) error {
	id := c.snapshot()[addr]
	if id == "" {
		return fmt.Errorf("pause %s: no such container", addr)
	}
	// Thawed whatever happens, and the pause not cancelled in flight: a
	// cancelled request may still have frozen the container (see Kill).
	defer c.cli.ContainerUnpause(context.WithoutCancel(ctx), id, client.ContainerUnpauseOptions{})
	if _, err := c.cli.ContainerPause(context.WithoutCancel(ctx), id, client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("pause %s: %w", addr, err)
	}
	return sleep(ctx, d)
}

// Partition cuts the server off the ring's network for d — it keeps
// running, reaches nobody and nobody reaches it, clients included — then
// reconnects it with its address and service alias (docker network
// disconnect/connect). It returns once the server is reachable again.
func (c *Compose) Partition(ctx context.Context, addr string, d time.Duration) error {
	id := c.snapshot()[addr]
	if id == "" {
		return fmt.Errorf("partition %s: no such container", addr)
	}
	ins, err := c.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("partition %s: %w", addr, err)
	}
	service, net := ins.Container.Config.Labels["com.docker.compose.service"], c.project+"_default"
	ip, err := netip.ParseAddr(strings.TrimSuffix(addr, ":7000"))
	if err != nil {
		return fmt.Errorf("partition %s: %w", addr, err)
	}
	// The disconnect is not cancelled in flight and the heal always runs
	// (see Kill): a cancelled request may still have cut the server off.
	heal := context.WithoutCancel(ctx)
	_, err = c.cli.NetworkDisconnect(heal, net, client.NetworkDisconnectOptions{Container: id, Force: true})
	waited := err
	if err == nil {
		c.refresh(ctx)
		waited = sleep(ctx, d)
	}
	if _, err := c.cli.NetworkConnect(heal, net, client.NetworkConnectOptions{Container: id, EndpointConfig: &network.EndpointSettings{
		IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: ip}, Aliases: []string{service},
	}}); err != nil {
		return fmt.Errorf("healing the partition of %s: %w", addr, err)
	}
	if err := c.refresh(heal); err != nil {
		return err
	}
	if err := WaitHealthy(heal, addr, nil); err != nil {
		return err
	}
	return waited
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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

// Logs returns the logs of every container of the ring.
func (c *Compose) Logs(ctx context.Context) (string, error) {
	return c.compose(ctx, "logs", "--no-color")
}

// Close removes the project's containers and network.
func (c *Compose) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if c.leave != nil {
		c.leave()
	}
	_, err := c.compose(ctx, "down", "-v", "--remove-orphans", "-t", "1")
	os.RemoveAll(c.dir)
	c.cli.Close()
	return err
}
