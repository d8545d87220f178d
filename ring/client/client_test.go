package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/ring/kv"
)

// flaky answers the first n requests with code, then 204.
func flaky(t *testing.T, n int32, code int) (addr string, calls *atomic.Int32) {
	calls = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= n {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "owner without a serving lease", code)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), calls
}

// A write answered 503 for longer than a handful of quick retries (a lease
// a loaded machine let lapse) is acknowledged once the owner serves again,
// as long as the caller's deadline allows.
func TestPutRetriesUntilTheDeadline(t *testing.T) {
	addr, calls := flaky(t, 9, http.StatusServiceUnavailable)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, New([]string{addr}, false).Put(ctx, "k", []byte("v")))
	assert.EqualValues(t, 10, calls.Load(), "more attempts than a client makes without a deadline")
}

func TestPutWithoutDeadlineStopsAfterItsAttempts(t *testing.T) {
	addr, calls := flaky(t, 1000, http.StatusBadGateway)
	err := New([]string{addr}, false).Put(context.Background(), "k", []byte("v"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "502")
	assert.Contains(t, err.Error(), "after 8 attempts")
	assert.EqualValues(t, attemptsWithoutDeadline, calls.Load())
}

func TestPutDeadlineNamesTheLastFailure(t *testing.T) {
	addr, _ := flaky(t, 1000, http.StatusServiceUnavailable)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := New([]string{addr}, false).Put(ctx, "k", []byte("v"))
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), err)
	assert.Contains(t, err.Error(), "without a serving lease")
}

// A refusal that no retry can change is returned at once.
func TestPutDoesNotRetryAClientError(t *testing.T) {
	addr, calls := flaky(t, 1000, http.StatusRequestEntityTooLarge)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := New([]string{addr}, false).Put(ctx, "k", []byte("v"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "413")
	assert.EqualValues(t, 1, calls.Load())
}

// A server that answers more than any value could be is refused, not read
// to the end.
func TestGetRefusesAnAnswerLongerThanAnyValue(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 1<<20)
		for range kv.MaxValueLen>>20 + 2 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	_, err := New([]string{strings.TrimPrefix(srv.URL, "http://")}, false).Get(context.Background(), "k")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "longer than any value")
}

func TestBackoffGrowsToItsCap(t *testing.T) {
	assert.Equal(t, firstBackoff, backoff(1))
	assert.Equal(t, 2*firstBackoff, backoff(2))
	assert.Equal(t, maxBackoff, backoff(6))
	assert.Equal(t, maxBackoff, backoff(1<<30), "no overflow at absurd attempt counts")
}
