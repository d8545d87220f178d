package worker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/internal/loadreport"
)

func TestWorkEndpoint(t *testing.T) {
	h, err := New(Options{Name: "w7", CPULimit: 0.5})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/work?cost=1000", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "w7", rec.Header().Get("X-Worker"))
	assert.True(t, strings.HasPrefix(rec.Body.String(), "w7 1000 "))

	for _, bad := range []string{"-1", "x", "10000001"} {
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/work?cost="+bad, nil))
		assert.Equal(t, http.StatusBadRequest, rec.Code, bad)
		assert.Contains(t, rec.Body.String(), "cost")
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Contains(t, rec.Body.String(), "worker_requests_total 1")
}

func TestCPULimitValidated(t *testing.T) {
	for _, bad := range []float64{-1, 65} {
		_, err := New(Options{CPULimit: bad})
		assert.ErrorContains(t, err, "cpu limit")
	}
	h, err := New(Options{CPULimit: 2.5})
	require.NoError(t, err)
	assert.Equal(t, 3, cap(h.slots))
	assert.InDelta(t, 2.5/3, h.duty, 1e-12)
}

// Every response carries the load report; /load serves it to probes.
func TestWorkerReportsItsLoad(t *testing.T) {
	h, err := New(Options{Name: "w1", CPULimit: 1})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/work?cost=20000", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	r, err := loadreport.ParseHeader(rec.Header().Get(loadreport.Header))
	require.NoError(t, err)
	assert.Positive(t, r.LatencyMS)
	assert.Zero(t, r.RIF, "the request itself is done when the header is written")

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/load", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	probe, err := loadreport.Decode(rec.Body.Bytes())
	require.NoError(t, err)
	assert.InDelta(t, r.LatencyMS, probe.LatencyMS, r.LatencyMS)
}

// A client that goes away stops costing CPU: the request at the most a
// worker allows, ended by its client, is abandoned rather than computed
// to the end, and the worker serves the next one.
func TestGoneClientStopsTheWork(t *testing.T) {
	h, err := New(Options{Name: "w"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // gone before the work starts: the first check ends it
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/work?cost=10000000", nil).WithContext(ctx))
	assert.Empty(t, rec.Body.String(), "nobody reads an answer")

	// Gone mid-way: cancelled once the work is under way.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/work?cost=10000000", nil).WithContext(ctx))
	}()
	require.Eventually(t, func() bool { return h.active.Load() == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	<-done
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Contains(t, rec.Body.String(), "worker_abandoned_total 2")
	assert.Contains(t, rec.Body.String(), "worker_requests_total 0")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/work?cost=10", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
}
