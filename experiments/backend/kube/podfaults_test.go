package kube

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The Pod faults and hand-made Pods are the kind backend's: the process
// backend refuses them by name rather than acting on nothing.
func TestPodFaultsNeedTheKindBackend(t *testing.T) {
	ctx := context.Background()
	c := &Cluster{el: &Processes{}}
	_, err := c.PodTemplate(ctx, "ns", App{Name: "app"}, "bld", "lease", Timing{})
	assert.ErrorIs(t, err, errNotKind)
	assert.ErrorIs(t, c.FreezeContainers(ctx, "ns", "pod", true, "elector"), errNotKind)
	assert.ErrorIs(t, c.SignalContainer(ctx, "ns", "pod", "faultproxy", "SIGUSR1"), errNotKind)
	assert.ErrorIs(t, c.CutPod(ctx, "ns", "pod", "faultproxy", "10.96.0.1:443", true), errNotKind)
}

// A cut needs an IP address and a port: a name or a bare address would
// make a rule that matches nothing, or the wrong thing.
func TestCutPodWantsIPAndPort(t *testing.T) {
	c := &Cluster{el: &podRunner{}}
	for _, dst := range []string{"", "10.96.0.1", "kubernetes.default:443", "10.96.0.1:443; rm -rf /", "10.96.0.1:0", "10.96.0.1:65536"} {
		err := c.CutPod(context.Background(), "ns", "pod", "faultproxy", dst, true)
		assert.ErrorContains(t, err, "want ip:port", "%q", dst)
	}
}
