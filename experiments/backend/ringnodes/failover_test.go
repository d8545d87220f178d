package ringnodes

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/server"
)

// scriptedRing serves /internal/status from statuses it changes on Kill,
// as the servers of a ring would report a failover: the largest survivor
// takes over, each survivor's detector having fired at suspect(kill).
type scriptedRing struct {
	mu      sync.Mutex
	sts     map[string]*server.Status
	addrs   []string
	suspect func(kill time.Time) time.Time
}

func newScriptedRing(t *testing.T, n int, suspect func(time.Time) time.Time) *scriptedRing {
	r := &scriptedRing{sts: map[string]*server.Status{}, suspect: suspect}
	for range n {
		var addr string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			r.mu.Lock()
			defer r.mu.Unlock()
			json.NewEncoder(w).Encode(r.sts[addr])
		}))
		t.Cleanup(srv.Close)
		addr = strings.TrimPrefix(srv.URL, "http://")
		r.addrs = append(r.addrs, addr)
	}
	// Settled on the smallest UID, as a fresh ring is on its starter.
	first := slices.MinFunc(r.addrs, func(a, b string) int { return ring.UIDOf(a).Cmp(ring.UIDOf(b)) })
	for _, a := range r.addrs {
		r.sts[a] = &server.Status{Addr: a, Election: "chang-roberts", Leader: first, Coordinator: a == first, Servers: r.addrs}
	}
	return r
}

func (r *scriptedRing) Addrs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.addrs)
}

func (r *scriptedRing) Kill(_ context.Context, addr string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	kill := time.Now()
	r.addrs = slices.DeleteFunc(slices.Clone(r.addrs), func(a string) bool { return a == addr })
	winner := slices.MaxFunc(r.addrs, func(a, b string) int { return ring.UIDOf(a).Cmp(ring.UIDOf(b)) })
	sus := r.suspect(kill)
	at := sus.Add(time.Millisecond).UnixNano()
	for _, a := range r.addrs {
		st := r.sts[a]
		st.Leader, st.Coordinator, st.Servers = winner, a == winner, r.addrs
		st.Events = server.Events{Suspected: sus.UnixNano(), ElectionSent: at, LeaderKnown: at, MetaApplied: at}
		if a == winner {
			st.Events.Announced, st.Events.Won = at, at
		}
	}
	return nil
}

func (r *scriptedRing) Restart(context.Context, string) error { return nil }
func (r *scriptedRing) Add(context.Context) (string, error)   { return "", nil }
func (r *scriptedRing) Close() error                          { return nil }

func TestKillCoordinatorTimesTheDetectorAfterTheKill(t *testing.T) {
	r := newScriptedRing(t, 3, func(kill time.Time) time.Time { return kill.Add(5 * time.Millisecond) })
	coord := r.sts[r.addrs[0]].Leader
	f, err := KillCoordinator(context.Background(), r)
	require.NoError(t, err)
	assert.Equal(t, coord, f.Killed)
	assert.True(t, f.NewIsMaxLive)
	assert.Greater(t, f.Detect, time.Duration(0))
	assert.GreaterOrEqual(t, f.AllKnow, f.Detect)
}

// A detector that fired before the kill (falsely, on a loaded machine)
// started the election the kill joined: no failover to time.
func TestKillCoordinatorRefusesARingAlreadyElecting(t *testing.T) {
	r := newScriptedRing(t, 3, func(kill time.Time) time.Time { return kill.Add(-time.Second) })
	coord := r.sts[r.addrs[0]].Leader
	f, err := KillCoordinator(context.Background(), r)
	require.ErrorIs(t, err, ErrDisturbed)
	assert.Equal(t, coord, f.Killed, "the killed server, to bring back")
	assert.Regexp(t, `last suspicions: \S+ -\d+\.\d ms from the kill;`, err.Error())
}

// A hop's share in the server is the median over the survivors that
// passed this election's ELECTED on: not the one where it ended, not one
// that learned its leader before the kill (its forward is an older
// election's), not one that never timed one; a forward that had to dial
// its new successor first does not move it.
func TestForwardShareCountsThisElectionsForwarders(t *testing.T) {
	const kill = 1000
	st := func(known, forward int64) server.Status {
		return server.Status{Events: server.Events{LeaderKnown: known, ElectedForward: forward}}
	}
	sts := map[string]server.Status{
		"winner":  st(2000, 90_000),
		"a":       st(2000, 10_000),
		"b":       st(2100, 20_000),
		"dialled": st(2100, 780_000),
		"stale":   st(900, 70_000),
		"none":    st(2200, 0),
	}
	assert.Equal(t, 20*time.Microsecond, forwardShare(sts, "winner", kill))
	assert.Zero(t, forwardShare(map[string]server.Status{"winner": st(2000, 5)}, "winner", kill), "none passed it on")
}
