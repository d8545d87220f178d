package leaderapp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A new leader's announcement waits for a follower slow to answer (a
// loaded machine) past the stale period, so that no follower takes the
// deposed leader's writes after the new leader's first; the deposed
// leader itself, which does not answer (frozen), holds it up for a stale
// period only.
func TestAnnounceWaitsForSlowFollowersNotTheDeposedLeader(t *testing.T) {
	deposedGaveUp, release := make(chan struct{}), make(chan struct{})
	deposed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // frozen: never answers
		close(deposedGaveUp)
	}))
	defer deposed.Close()
	var slowCancelled, slowAnswered atomic.Bool
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
			slowAnswered.Store(true)
			w.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done():
			slowCancelled.Store(true)
		}
	}))
	defer slow.Close()
	s, err := New(Config{Name: "new", Sidecar: "http://127.0.0.1:1", Secret: secret, Fencing: true,
		Peers:  map[string]string{"new": "http://127.0.0.1:1", "old": deposed.URL, "slow": slow.URL},
		Poll:   10 * time.Millisecond,
		Client: &http.Client{Timeout: time.Minute}})
	require.NoError(t, err)
	s.followed = "old"

	done := make(chan struct{})
	go func() { defer close(done); s.announce(context.Background(), 4) }()
	select {
	case <-deposedGaveUp:
	case <-time.After(30 * time.Second):
		t.Fatal("the announcement to the deposed leader never gave up")
	}
	select {
	case <-done:
		t.Fatal("the announcement ended before the slow follower answered")
	default:
	}
	close(release)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the announcement did not end once every live follower answered")
	}
	assert.True(t, slowAnswered.Load(), "the slow follower heard the term")
	assert.False(t, slowCancelled.Load(), "the slow follower was not given up on")
	assert.Equal(t, int64(5), s.announced.Load(), "term 4 announced")
}

// An announcement a peer controls, at its limits and past them: without
// the secret 403, a term that is no term 400, an older term 409 naming
// the newest; none of them moves the fence, and a huge body is ignored.
func TestFenceAnnouncementRefusesHostileInput(t *testing.T) {
	s, err := New(Config{Name: "a", Sidecar: "http://127.0.0.1:1", Secret: secret, Fencing: true,
		Peers: map[string]string{"a": "http://127.0.0.1:1"}})
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	announce := func(term, key string, body io.Reader) *http.Response {
		req, err := http.NewRequest(http.MethodPut, srv.URL+"/internal/fence", body)
		require.NoError(t, err)
		req.Header.Set(HeaderSecret, key)
		req.Header.Set(HeaderTerm, term)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	require.Equal(t, http.StatusNoContent, announce("7", secret, nil).StatusCode)
	for _, c := range []struct {
		term, key string
		code      int
	}{
		{"8", "", http.StatusForbidden},
		{"8", secret + "x", http.StatusForbidden},
		{"", secret, http.StatusBadRequest},
		{"-1", secret, http.StatusBadRequest},
		{"8x", secret, http.StatusBadRequest},
		{"9223372036854775808", secret, http.StatusBadRequest}, // past int63: a term never grows that far
		{"18446744073709551616", secret, http.StatusBadRequest},
		{"6", secret, http.StatusConflict},
	} {
		resp := announce(c.term, c.key, nil)
		assert.Equal(t, c.code, resp.StatusCode, "term %q", c.term)
		if c.code == http.StatusConflict {
			assert.Equal(t, "7", resp.Header.Get(HeaderFence))
		}
		assert.Equal(t, uint64(7), s.fence.Newest(), "term %q leaves the fence at 7", c.term)
	}
	huge := io.LimitReader(zeros{}, 64<<20)
	assert.Equal(t, http.StatusNoContent, announce("9223372036854775807", secret, huge).StatusCode, "the largest term, a 64-MiB body")
	assert.Equal(t, uint64(1<<63-1), s.fence.Newest())
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
