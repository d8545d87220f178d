package kindrun_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ringside/ringside/k8s/kindrun"
)

func TestWorkersAreTheNodesPodsRunOn(t *testing.T) {
	nodes := []string{"ringside-control-plane", "ringside-worker", "ringside-worker2", "ringside-worker10", "ringside-external-load-balancer"}
	assert.Equal(t, []string{"ringside-worker", "ringside-worker2", "ringside-worker10"}, kindrun.Workers("ringside", nodes))

	// Another cluster's nodes and names that only look like a worker's.
	assert.Empty(t, kindrun.Workers("ringside", []string{"other-worker", "ringside-workers", "ringside-worker-2", "ringside-control-plane2"}))
	// A cluster named like another's prefix: "a-worker" is cluster a's worker, not cluster "a-w"'s.
	assert.Equal(t, []string{"a-worker"}, kindrun.Workers("a", []string{"a-worker", "a-control-plane"}))
	assert.Empty(t, kindrun.Workers("a-w", []string{"a-worker"}))
	// One node: no workers, so Load leaves the choice to kind (every node).
	assert.Empty(t, kindrun.Workers("solo", []string{"solo-control-plane"}))
}
