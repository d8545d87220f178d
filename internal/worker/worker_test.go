package worker

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
