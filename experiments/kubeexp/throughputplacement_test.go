package kubeexp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A forced placement that did not hold is forced again, each time
// logged, up to forceTries in all; any other error ends it at once.
func TestAForcedPlacementThatDidNotHoldIsForcedAgain(t *testing.T) {
	notAsForced := fmt.Errorf("%w: app0-1 leads app0 on worker2, forced onto worker1", errNotAsForced)
	other := errors.New("no such node")
	for _, tc := range []struct {
		name      string
		results   []error
		wantTries int
		wantErr   error
	}{
		{"held at once", []error{nil}, 1, nil},
		{"held the second time", []error{notAsForced, nil}, 2, nil},
		{"held the last time", []error{notAsForced, notAsForced, nil}, forceTries, nil},
		{"never held", []error{notAsForced, notAsForced, notAsForced, nil}, forceTries, errNotAsForced},
		{"another error is not retried", []error{other, nil}, 1, other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			tries := 0
			out, err := untilAsForced(slog.New(slog.NewTextHandler(&logged, nil)), "balanced", func() (int, error) {
				tries++
				return tries, tc.results[tries-1]
			})
			assert.Equal(t, tc.wantTries, tries)
			assert.Equal(t, tries, out, "the last try's rows")
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			// Each try but the first follows a logged failure.
			assert.Equal(t, tries-1, strings.Count(logged.String(), "forcing it again"))
		})
	}
}

// Before a load point, steady waits out replicas that answer leaderless
// (a sidecar's answer gone stale on a saturated node) until every one
// names the placement's leader again, and refuses a leader that moved.
func TestSteadyWaitsOutALapseAndRefusesAMovedLeader(t *testing.T) {
	// replica answers /role: leaderless for its first lapse answers, then
	// following leader.
	replica := func(lapse int, leader string) string {
		var answers atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/role" {
				http.NotFound(w, r)
				return
			}
			if answers.Add(1) <= int32(lapse) {
				fmt.Fprint(w, `{"role":"leaderless","leader":""}`)
				return
			}
			fmt.Fprintf(w, `{"role":"follower","leader":%q}`, leader)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	app := func(urls ...string) *tpApp {
		a := &tpApp{name: "app0", url: map[string]string{}}
		for i, u := range urls {
			pod := fmt.Sprintf("app0-%d", i)
			a.pods = append(a.pods, pod)
			a.url[pod] = u
		}
		return a
	}
	ctx := context.Background()
	var asked atomic.Int32 // how often the leader was asked its role
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		fmt.Fprint(w, `{"role":"leader","leader":"app0-0"}`)
	}))
	t.Cleanup(leader.Close)
	require.NoError(t, steady(ctx, http.DefaultClient, []*tpApp{app(leader.URL, replica(2, "app0-0"))}, []string{"app0-0"}))
	assert.Equal(t, int32(3), asked.Load(), "asked again until the lapsed replica named the leader")

	moved := app(replica(0, "app0-1"), replica(0, "app0-1"))
	err := steady(ctx, http.DefaultClient, []*tpApp{moved}, []string{"app0-0"})
	require.ErrorIs(t, err, errNotAsForced)
	assert.ErrorContains(t, err, "app0-1 leads app0, not app0-0")
}
