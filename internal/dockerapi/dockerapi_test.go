package dockerapi_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/internal/dockerapi"
	"github.com/ringside/ringside/internal/imagebuild"
)

// RemoveStack removes a stack's networks even with a container the stack
// did not label still attached (the experiments container joins the
// ringnode network; CI once failed on exactly that network "has active
// endpoints"), and leaves that container itself alone.
func TestRemoveStackDisconnectsWhatIsAttached(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	image := "ringside-dockerapi-test:latest"
	require.NoError(t, imagebuild.Build(ctx, image, "github.com/ringside/ringside/cmd/worker"))
	cli, err := dockerapi.Connect(ctx)
	require.NoError(t, err)
	defer cli.Close()

	stack := fmt.Sprintf("rstest%d", time.Now().UnixNano()%1e9)
	labels := map[string]string{dockerapi.StackLabel: stack}
	net, err := cli.NetworkCreate(ctx, stack+"_default", client.NetworkCreateOptions{Labels: labels})
	require.NoError(t, err)
	t.Cleanup(func() { cli.NetworkRemove(context.Background(), net.ID, client.NetworkRemoveOptions{}) })

	start := func(name string, labels map[string]string) string {
		c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name:       name,
			Config:     &container.Config{Image: image, Labels: labels},
			HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(stack + "_default")},
		})
		require.NoError(t, err)
		t.Cleanup(func() {
			cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
		})
		_, err = cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{})
		require.NoError(t, err)
		return c.ID
	}
	started := start(stack+"-node", labels)
	bystander := start(stack+"-experiments", nil)

	require.NoError(t, dockerapi.RemoveStack(ctx, cli, stack))

	f := client.Filters{}.Add("label", dockerapi.StackLabel+"="+stack)
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	require.NoError(t, err)
	assert.Empty(t, nets.Items, "the stack's network is gone")
	_, err = cli.ContainerInspect(ctx, started, client.ContainerInspectOptions{})
	assert.Error(t, err, "the stack's container is gone")
	ins, err := cli.ContainerInspect(ctx, bystander, client.ContainerInspectOptions{})
	require.NoError(t, err, "the unlabelled container stays")
	assert.True(t, ins.Container.State.Running)
	assert.NotContains(t, ins.Container.NetworkSettings.Networks, stack+"_default")

	// Nothing left: a second run succeeds and does nothing.
	require.NoError(t, dockerapi.RemoveStack(ctx, cli, stack))
}

// OnlyStuck lets a run go on only when every error is a network the
// engine will not let go of.
func TestOnlyStuck(t *testing.T) {
	stuck := fmt.Errorf("remove network a_default: %w (has active endpoints)", dockerapi.ErrStuckNetwork)
	other := errors.New("remove container 0123456789ab: conflict")
	assert.False(t, dockerapi.OnlyStuck(nil))
	assert.True(t, dockerapi.OnlyStuck(stuck))
	assert.True(t, dockerapi.OnlyStuck(errors.Join(stuck, stuck)))
	assert.False(t, dockerapi.OnlyStuck(other))
	assert.False(t, dockerapi.OnlyStuck(errors.Join(stuck, other)))
	assert.False(t, dockerapi.OnlyStuck(errors.Join(other, stuck)))
	assert.True(t, dockerapi.OnlyStuck(errors.Join(errors.Join(stuck), stuck)))
}
