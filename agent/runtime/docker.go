package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"strconv"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/ringside/ringside/agent/score"
	"github.com/ringside/ringside/internal/dockerapi"
)

// DockerOptions configure the Docker runtime.
type DockerOptions struct {
	Image   string            // worker image
	Network string            // network new workers join and whose IP addresses are used
	Pool    string            // value of the ringside.pool label; separates stacks
	Port    int               // the worker's HTTP port inside the container (default 8080)
	Args    []string          // extra worker arguments
	Labels  map[string]string // extra labels on every worker
}

// Docker runs workers as containers through the Engine SDK. The API
// version is negotiated, so the same code talks to this machine's 1.41
// engine and to current ones.
type Docker struct {
	cli *client.Client
	o   DockerOptions

	mu      sync.Mutex
	limits  map[string]float64 // container → CPUs, from inspect
	created int
}

// NewDocker connects to the engine named by DOCKER_HOST (default socket).
func NewDocker(ctx context.Context, o DockerOptions) (*Docker, error) {
	cli, err := dockerapi.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if o.Port == 0 {
		o.Port = 8080
	}
	return &Docker{cli: cli, o: o, limits: map[string]float64{}}, nil
}

// Close releases the client.
func (d *Docker) Close() error { return d.cli.Close() }

// Client exposes the SDK client (tests kill containers with it).
func (d *Docker) Client() *client.Client { return d.cli }

func (d *Docker) filters() client.Filters {
	f := client.Filters{}.Add("label", LabelRole+"="+RoleWorker)
	if d.o.Pool != "" {
		f = f.Add("label", LabelPool+"="+d.o.Pool)
	}
	return f
}

// List returns the running workers of this pool.
func (d *Docker) List(ctx context.Context) ([]Instance, error) {
	res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{Filters: d.filters()})
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	var out []Instance
	for _, c := range res.Items {
		if c.State != container.StateRunning {
			continue
		}
		ip := d.ip(c)
		if ip == "" {
			continue // not attached yet
		}
		lim, err := d.cpuLimit(ctx, c.ID)
		if err != nil {
			return nil, err
		}
		name := c.ID[:12]
		if n := c.Labels[LabelName]; n != "" {
			name = n
		} else if len(c.Names) > 0 {
			name = c.Names[0][1:]
		}
		out = append(out, Instance{
			ID: c.ID, Name: name, Addr: net.JoinHostPort(ip, strconv.Itoa(d.o.Port)),
			Default: c.Labels[LabelDefault] == "true", CPULimit: lim,
		})
	}
	return out, nil
}

func (d *Docker) ip(c container.Summary) string {
	if c.NetworkSettings == nil {
		return ""
	}
	for name, ep := range c.NetworkSettings.Networks {
		if ep == nil || !ep.IPAddress.IsValid() {
			continue
		}
		if d.o.Network == "" || name == d.o.Network {
			return ep.IPAddress.String()
		}
	}
	return ""
}

func (d *Docker) cpuLimit(ctx context.Context, id string) (float64, error) {
	d.mu.Lock()
	lim, ok := d.limits[id]
	d.mu.Unlock()
	if ok {
		return lim, nil
	}
	res, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return 0, fmt.Errorf("inspect %s: %w", id[:12], err)
	}
	if hc := res.Container.HostConfig; hc != nil {
		switch {
		case hc.NanoCPUs > 0:
			lim = float64(hc.NanoCPUs) / 1e9
		case hc.CPUQuota > 0 && hc.CPUPeriod > 0:
			lim = float64(hc.CPUQuota) / float64(hc.CPUPeriod)
		}
	}
	d.mu.Lock()
	d.limits[id] = lim
	d.mu.Unlock()
	return lim, nil
}

// SetCPULimit changes a running worker's CPU limit (docker update --cpus):
// a neighbour taking the machine, for experiments.
func (d *Docker) SetCPULimit(ctx context.Context, id string, cpus float64) error {
	if !(cpus > 0) || cpus > 64 {
		return fmt.Errorf("cpu limit %v: want (0, 64]", cpus)
	}
	_, err := d.cli.ContainerUpdate(ctx, id, client.ContainerUpdateOptions{Resources: &container.Resources{NanoCPUs: int64(cpus * 1e9)}})
	if err != nil {
		return fmt.Errorf("update %s: %w", id[:min(12, len(id))], err)
	}
	d.mu.Lock()
	d.limits[id] = cpus
	d.mu.Unlock()
	return nil
}

// Sample reads one stats record (one-shot: no second sample inside the
// daemon, the caller keeps the previous one).
func (d *Docker) Sample(ctx context.Context, inst Instance) (score.Sample, error) {
	res, err := d.cli.ContainerStats(ctx, inst.ID, client.ContainerStatsOptions{})
	if err != nil {
		return score.Sample{}, fmt.Errorf("stats %s: %w", inst.Name, err)
	}
	defer res.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		return score.Sample{}, fmt.Errorf("stats %s: decode: %w", inst.Name, err)
	}
	return FromStats(st, inst.CPULimit), nil
}

// FromStats converts a Docker stats record; cgroup v1 names the
// reclaimable page cache total_inactive_file, v2 inactive_file.
func FromStats(st container.StatsResponse, cpuLimit float64) score.Sample {
	s := score.Sample{
		At:         st.Read,
		CPUTotal:   st.CPUStats.CPUUsage.TotalUsage,
		SystemCPU:  st.CPUStats.SystemUsage,
		OnlineCPUs: int(st.CPUStats.OnlineCPUs),
		CPULimit:   cpuLimit,
		MemUsage:   st.MemoryStats.Usage,
		MemLimit:   st.MemoryStats.Limit,
	}
	if s.OnlineCPUs == 0 {
		s.OnlineCPUs = len(st.CPUStats.CPUUsage.PercpuUsage)
	}
	if v, ok := st.MemoryStats.Stats["total_inactive_file"]; ok {
		s.MemInactive = v
	} else {
		s.MemInactive = st.MemoryStats.Stats["inactive_file"]
	}
	for _, n := range st.Networks {
		s.NetBytes += n.RxBytes + n.TxBytes
	}
	if s.At.IsZero() {
		s.At = time.Now()
	}
	return s
}

// Start creates and starts a worker container.
func (d *Docker) Start(ctx context.Context, sp Spec) (Instance, error) {
	labels := map[string]string{LabelRole: RoleWorker, LabelDefault: strconv.FormatBool(sp.Default)}
	maps.Copy(labels, d.o.Labels)
	if d.o.Pool != "" {
		labels[LabelPool] = d.o.Pool
	}
	hc := &container.HostConfig{
		Resources:     container.Resources{NanoCPUs: int64(sp.CPULimit * 1e9), Memory: int64(sp.MemoryMB) << 20},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
	}
	var nc *network.NetworkingConfig
	if d.o.Network != "" {
		hc.NetworkMode = container.NetworkMode(d.o.Network)
		nc = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{d.o.Network: {}}}
	}
	d.mu.Lock()
	d.created++
	name := sp.Name
	if name == "" {
		// A name the worker also answers with (X-Worker), so requests,
		// stats and the dashboard speak of the same thing.
		name = fmt.Sprintf("%s-%d", cmp.Or(d.o.Pool, fmt.Sprintf("worker%d", time.Now().UnixMilli()%1e6)), d.created)
	}
	d.mu.Unlock()
	// Container names are global on the engine: a named worker of a pool
	// (lb-live's w1-1cpu) gets the pool in its container's name, so two
	// pools on one engine never collide; the worker keeps its own name.
	cname := name
	if sp.Name != "" && d.o.Pool != "" {
		cname = d.o.Pool + "-" + name
		labels[LabelName] = name
	}
	args := append([]string{"--addr", ":" + strconv.Itoa(d.o.Port), "--name", name}, d.o.Args...)
	res, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:             cname,
		Config:           &container.Config{Image: d.o.Image, Cmd: args, Labels: labels},
		HostConfig:       hc,
		NetworkingConfig: nc,
	})
	if err != nil {
		return Instance{}, fmt.Errorf("create worker: %w", err)
	}
	if _, err := d.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		d.remove(res.ID)
		return Instance{}, fmt.Errorf("start worker %s: %w", res.ID[:12], err)
	}
	// The address is known once the engine has attached the network.
	for range 50 {
		list, err := d.List(ctx)
		if err != nil {
			return Instance{}, err
		}
		for _, in := range list {
			if in.ID == res.ID {
				return in, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return Instance{}, fmt.Errorf("worker %s started but has no address on network %q", res.ID[:12], d.o.Network)
}

// Stop stops and removes a worker.
func (d *Docker) Stop(ctx context.Context, id string) error {
	timeout := 2
	if _, err := d.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &timeout}); err != nil && !notFound(err) {
		return fmt.Errorf("stop worker %s: %w", short(id), err)
	}
	return d.remove(id)
}

func (d *Docker) remove(id string) error {
	d.mu.Lock()
	delete(d.limits, id)
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !notFound(err) {
		return fmt.Errorf("remove worker %s: %w", short(id), err)
	}
	return nil
}

// RemoveAll removes every container of the pool (cleanup after a run).
func (d *Docker) RemoveAll(ctx context.Context) error {
	res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: d.filters()})
	if err != nil {
		return err
	}
	for _, c := range res.Items {
		if err := d.remove(c.ID); err != nil {
			return err
		}
	}
	return nil
}

func short(id string) string { return id[:min(12, len(id))] }

func notFound(err error) bool { return cerrdefs.IsNotFound(err) }
