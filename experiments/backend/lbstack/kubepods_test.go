package lbstack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// weighted waits through garbage and zero weights for a balancer's first
// weighted worker, and names what it last saw when none comes.
func TestWeightedWaitsForTheFeedsWeights(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		switch calls.Add(1) {
		case 1:
			w.Write([]byte("garbage {{{\n"))
		case 2:
			w.Write([]byte("# TYPE balancer_worker_weight gauge\nbalancer_worker_weight{worker=\"a\"} 0\n"))
		default:
			w.Write([]byte("# TYPE balancer_worker_weight gauge\nbalancer_worker_weight{worker=\"a\"} 0\nbalancer_worker_weight{worker=\"b\"} 2.5\n"))
		}
	}))
	defer srv.Close()
	require.NoError(t, weighted(context.Background(), srv.URL))
	assert.GreaterOrEqual(t, calls.Load(), int32(3))

	zero := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("balancer_worker_weight{worker=\"a\"} 0\n"))
	}))
	defer zero.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := weighted(ctx, zero.URL)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no weighted worker")
}
