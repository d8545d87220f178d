package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The history keeps the last historyLen steps, oldest first, each with
// every worker's utilisation, weight and share: bounded however long the
// agent runs.
func TestHistoryIsBoundedAndOrdered(t *testing.T) {
	var h history
	t0 := time.UnixMilli(1_000_000)
	for i := range historyLen + 100 {
		h.add(t0.Add(time.Duration(i)*time.Second), []WorkerState{{Name: "a", CPU: float64(i % 100), Weight: 7}, {Name: "b"}}, []float64{0.25, 0.75})
	}
	got := h.ordered()
	require.Len(t, got, historyLen)
	assert.Equal(t, t0.Add(100*time.Second).UnixMilli(), got[0].At, "the oldest kept is the 101st")
	assert.Equal(t, t0.Add(time.Duration(historyLen+99)*time.Second).UnixMilli(), got[len(got)-1].At)
	for i := 1; i < len(got); i++ {
		require.Less(t, got[i-1].At, got[i].At)
	}
	assert.Equal(t, PointWorker{Name: "a", CPU: float64((historyLen + 99) % 100), Weight: 7, Share: 0.25}, got[len(got)-1].Workers[0])
	assert.Equal(t, 0.75, got[0].Workers[1].Share)
}
