// Package dockerapi connects to the Docker engine through the SDK, the
// one way ringside talks to the engine outside the compose CLI: the SDK
// negotiates the API version, so an older or newer engine works as is,
// and the experiments image needs no docker CLI.
package dockerapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/moby/moby/client"
)

// Connect returns a client for the engine named by DOCKER_HOST (default:
// the local socket), with the API version negotiated.
func Connect(ctx context.Context) (*client.Client, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker engine: %w", err)
	}
	return cli, nil
}

// InContainerEnv is set to 1 in the experiments image: ringside runs in a
// container beside the ones it starts, not on the host.
const InContainerEnv = "RINGSIDE_IN_CONTAINER"

// Self returns the ID and labels of the container this process runs in,
// or ok false outside one. Docker names a container's host after its ID.
func Self(ctx context.Context, cli *client.Client) (id string, labels map[string]string, ok bool, err error) {
	if os.Getenv(InContainerEnv) != "1" {
		return "", nil, false, nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", nil, false, err
	}
	res, err := cli.ContainerInspect(ctx, host, client.ContainerInspectOptions{})
	if err != nil {
		return "", nil, false, fmt.Errorf("find this process's container (hostname %s): %w", host, err)
	}
	return res.Container.ID, res.Container.Config.Labels, true, nil
}

// Join connects this process's container to network, so that it reaches
// the containers there by address as a process on the host does; leave
// disconnects it again (a network with a container attached cannot be
// removed). Outside a container both do nothing.
func Join(ctx context.Context, cli *client.Client, network string) (leave func(), err error) {
	id, _, ok, err := Self(ctx, cli)
	if err != nil || !ok {
		return func() {}, err
	}
	if _, err := cli.NetworkConnect(ctx, network, client.NetworkConnectOptions{Container: id}); err != nil {
		return func() {}, fmt.Errorf("join network %s: %w", network, err)
	}
	return func() {
		cli.NetworkDisconnect(context.Background(), network, client.NetworkDisconnectOptions{Container: id, Force: true})
	}, nil
}

// StackEnv carries the label value that marks everything the experiments
// of one compose stack start (label StackLabel), so that the stack removes
// what an interrupted run left behind.
const (
	StackEnv   = "RINGSIDE_STACK"
	StackLabel = "ringside.stack"
)

// StackLabels returns {StackLabel: $RINGSIDE_STACK} to add to what a
// backend creates, or nil outside a stack.
func StackLabels() map[string]string {
	if v := os.Getenv(StackEnv); v != "" {
		return map[string]string{StackLabel: v}
	}
	return nil
}

// RemoveStack removes the containers and networks labelled
// StackLabel=stack: what the experiments of a stack started and an
// interrupted run left behind. Every container still attached to those
// networks is disconnected first: this process's own container (it joins
// them to reach the nodes), or an endpoint the engine kept for a container
// already gone (20.10 leaves one behind when a container is removed while
// its disconnect is in flight; such a network refuses removal with "has
// active endpoints" until the endpoint is disconnected by name).
func RemoveStack(ctx context.Context, cli *client.Client, stack string) error {
	f := client.Filters{}.Add("label", StackLabel+"="+stack)
	ctrs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return fmt.Errorf("list the stack's containers: %w", err)
	}
	var errs []error
	for _, c := range ctrs.Items {
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			errs = append(errs, fmt.Errorf("remove container %.12s: %w", c.ID, err))
		}
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list the stack's networks: %w", err))...)
	}
	for _, n := range nets.Items {
		if err := RemoveNetwork(ctx, cli, n.ID, n.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RemoveNetwork disconnects whatever is attached to a network, by ID and,
// for an endpoint whose container is gone, by name, then removes it; a
// network the engine will not let go of is an ErrStuckNetwork.
func RemoveNetwork(ctx context.Context, cli *client.Client, id, name string) error {
	ins, err := cli.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect network %s: %w", name, err)
	}
	var errs []error
	for key, ep := range ins.Network.Containers {
		opts := client.NetworkDisconnectOptions{Container: key, Force: true}
		if _, err := cli.NetworkDisconnect(ctx, id, opts); err != nil {
			opts.Container = ep.Name
			if _, err2 := cli.NetworkDisconnect(ctx, id, opts); err2 != nil {
				errs = append(errs, fmt.Errorf("disconnect %s (%.12s) from network %s: %w", ep.Name, key, name, err))
			}
		}
	}
	if _, err := cli.NetworkRemove(ctx, id, client.NetworkRemoveOptions{}); err != nil {
		if len(errs) == 0 && strings.Contains(err.Error(), "has active endpoints") {
			if again, ierr := cli.NetworkInspect(ctx, id, client.NetworkInspectOptions{}); ierr == nil && len(again.Network.Containers) == 0 {
				return fmt.Errorf("remove network %s: %w (%v)", name, ErrStuckNetwork, err)
			}
		}
		return errors.Join(append(errs, fmt.Errorf("remove network %s: %w", name, err))...)
	}
	return nil
}

// ErrStuckNetwork marks a network the engine refuses to remove for
// "active endpoints" while it lists none and none can be disconnected by
// name: Docker 20.10's count of a network's endpoints can outlive the
// endpoints (moby/moby#42119, seen once in CI after a compose down), and
// only a restart of the engine, which counts them again, frees it.
// Nothing is attached to such a network any more.
var ErrStuckNetwork = errors.New("the engine counts endpoints on a network that has none (moby/moby#42119; an engine restart frees it)")

// OnlyStuck reports whether err, from RemoveStack, is nothing but
// networks the engine will not let go of (ErrStuckNetwork): a new run can
// go on beside them.
func OnlyStuck(err error) bool {
	if err == nil {
		return false
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !OnlyStuck(e) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, ErrStuckNetwork)
}
