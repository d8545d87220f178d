package agent

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k8s.io/utils/clock"

	"github.com/ringside/ringside/internal/weightfeed"
)

// A peer with the token can name as many balancers as it likes; the agent
// keeps the tallies of MaxBalancers of them and refuses new names past
// that, while a known balancer's tally still replaces its last one.
func TestTalliesAreBoundedByBalancer(t *testing.T) {
	a := &Agent{tallies: map[string]timedTally{}, cfg: Config{Clock: clock.RealClock{}}}
	for i := range MaxBalancers {
		require.NoError(t, a.tallied(weightfeed.Tally{Balancer: fmt.Sprint("b", i)}))
	}
	err := a.tallied(weightfeed.Tally{Balancer: "one-too-many"})
	assert.ErrorContains(t, err, "tallies of 256 balancers")
	assert.Len(t, a.tallies, MaxBalancers)
	require.NoError(t, a.tallied(weightfeed.Tally{Balancer: "b7", Workers: []weightfeed.WorkerTally{{ID: "w", Active: 3}}}))
	assert.Equal(t, int64(3), a.tallies["b7"].r.Workers[0].Active)
}
