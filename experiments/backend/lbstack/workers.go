package lbstack

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/moby/moby/client"

	"github.com/ringside/ringside/agent"
	"github.com/ringside/ringside/agent/runtime"
	"github.com/ringside/ringside/internal/dockerapi"
	"github.com/ringside/ringside/internal/imagebuild"
)

// Runtime is where the HTTP workers run: what the agent needs of a
// runtime, and their removal at the end.
type Runtime interface {
	agent.Runtime
	RemoveAll(ctx context.Context) error
}

// Backends of the workers: containers on the Docker engine, or local
// processes in cgroups.
const (
	Docker  = "docker"
	Process = "process"
)

// Workers returns the workers' runtime for backend, which backend it is
// (Docker falls back to processes, with a warning, where the engine is not
// usable) and its cleanup.
func Workers(ctx context.Context, backend string, log *slog.Logger) (Runtime, string, func(), error) {
	if backend == Kubernetes {
		k, cleanup, err := kubeWorkers(ctx)
		return k, Kubernetes, cleanup, err
	}
	if backend == Docker {
		d, cleanup, err := dockerRuntime(ctx)
		if err == nil {
			return d, Docker, cleanup, nil
		}
		log.Warn("Docker is not usable; falling back to the process backend", "err", err)
	}
	bin, err := imagebuild.Static(ctx, "github.com/ringside/ringside/cmd/worker")
	if err != nil {
		return nil, "", nil, err
	}
	p := runtime.NewProcess(bin)
	return p, Process, func() { p.RemoveAll(context.Background()) }, nil
}

func dockerRuntime(ctx context.Context) (*runtime.Docker, func(), error) {
	probe, err := runtime.NewDocker(ctx, runtime.DockerOptions{})
	if err != nil {
		return nil, nil, err
	}
	const image = "ringside/worker:dev"
	if err := imagebuild.Build(ctx, image, "github.com/ringside/ringside/cmd/worker"); err != nil {
		probe.Close()
		return nil, nil, err
	}
	pool := fmt.Sprintf("lb%d", time.Now().UnixNano()%1e6) // short: spawned workers are named after it
	cli := probe.Client()
	if _, err := cli.NetworkCreate(ctx, pool, client.NetworkCreateOptions{Driver: "bridge", Labels: dockerapi.StackLabels()}); err != nil {
		probe.Close()
		return nil, nil, fmt.Errorf("create network %s: %w", pool, err)
	}
	removeNet := func() {
		cli.NetworkRemove(context.Background(), pool, client.NetworkRemoveOptions{})
		probe.Close()
	}
	// From a container (the experiments stack) the workers are reached by
	// address only on their network.
	leave, err := dockerapi.Join(ctx, cli, pool)
	if err != nil {
		removeNet()
		return nil, nil, err
	}
	d, err := runtime.NewDocker(ctx, runtime.DockerOptions{Image: image, Network: pool, Pool: pool, Labels: dockerapi.StackLabels()})
	if err != nil {
		leave()
		removeNet()
		return nil, nil, err
	}
	return d, func() {
		d.RemoveAll(context.Background())
		d.Close()
		leave()
		removeNet()
	}, nil
}
