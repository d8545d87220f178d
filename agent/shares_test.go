package agent

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The agent's per-worker request counts forget workers that left: 10,000
// worker IDs churned through its steps leave the current ones only.
func TestRequestCountsForgetWorkersThatLeft(t *testing.T) {
	a := &Agent{lastReqs: map[string]uint64{}}
	for i := range 10_000 {
		states := []WorkerState{{ID: fmt.Sprintf("w%d", i), Requests: 5}, {ID: "stays", Requests: uint64(i)}}
		shares := a.sharesLocked(states)
		if i > 0 {
			assert.Equal(t, []float64{0, 1}, shares, "step %d: only the worker seen before has a share", i)
		}
	}
	assert.Len(t, a.lastReqs, 2)
}
