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

// A fenced leader deposed without knowing it — its sidecar still names
// it, its followers already serve a newer term — applies nothing: the
// followers' refusal comes before its own store takes the write, and it
// stops acting as leader. The same leader whose follower takes the write
// holds it too.
func TestFencedLeaderAppliesOnlyWhatItsFollowersTook(t *testing.T) {
	for _, c := range []struct {
		name   string
		refuse bool
	}{{"deposed", true}, {"leading", false}} {
		t.Run(c.name, func(t *testing.T) {
			side := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte(`{"name":"a","term":1}`))
			}))
			defer side.Close()
			follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if c.refuse && r.URL.Path != "/internal/fence" {
					w.Header().Set(HeaderFence, "2")
					http.Error(w, "fenced", http.StatusConflict)
					return
				}
				w.WriteHeader(http.StatusNoContent)
			}))
			defer follower.Close()
			var asLeader atomic.Int64
			s, err := New(Config{Name: "a", Sidecar: side.URL, Secret: secret, Fencing: true, Poll: 10 * time.Millisecond, Stale: time.Minute,
				Peers: map[string]string{"a": "http://127.0.0.1:1", "b": follower.URL},
				OnApply: func(a Applied) {
					if a.As == Leader {
						asLeader.Add(1)
					}
				}})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go s.Run(ctx)
			require.Eventually(t, func() bool { k, _ := s.Role(); return k == Leader }, 10*time.Second, 5*time.Millisecond, "announced, it leads")
			app := httptest.NewServer(s.Handler())
			defer app.Close()

			code := put(t, app.URL, "k", "v").StatusCode
			_, _, has := s.Store().Get("k")
			if !c.refuse {
				assert.Equal(t, http.StatusNoContent, code)
				assert.True(t, has)
				assert.Equal(t, int64(1), asLeader.Load())
				return
			}
			assert.Equal(t, http.StatusServiceUnavailable, code)
			assert.False(t, has, "the deposed leader's store did not take the write")
			assert.Zero(t, asLeader.Load(), "it applied nothing as leader")
			assert.Equal(t, uint64(2), s.fence.Newest(), "the refusal raised its fence")
			k, _ := s.Role()
			assert.Equal(t, Leaderless, k, "it no longer acts as leader")
		})
	}
}
