package leaderapp

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
