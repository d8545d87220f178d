package agent_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/agent/lifecycle"
	"github.com/ringside/ringside/agent/runtime"
	"github.com/ringside/ringside/internal/browsertest"
)

// The dashboard, rendered by a real browser, shows what the agent knows:
// every worker with its state, score, weight and share of requests, the
// sundowned worker at weight 0, and the events.
func TestDashboardInChromium(t *testing.T) {
	pc := lifecycle.Config{Min: 1, SundownAfter: 300 * time.Millisecond, DrainGrace: time.Hour}
	s := newStack(t, []runtime.Spec{{Name: "alpha", CPULimit: 1, Default: true}, {Name: "beta", CPULimit: 1}}, pc, nil, true)
	for range 60 {
		code, _ := get(t, s.lb.URL+"/work?cost=500")
		require.Equal(t, 200, code)
	}
	// beta idles into sundown (and stays there: the drain grace is long).
	require.Eventually(t, func() bool {
		for _, w := range s.a.View().Workers {
			if w.Name == "beta" {
				return w.State == string(lifecycle.Sundown)
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond)

	dom := browsertest.Chromium(t, s.srv.URL+"/", 3*time.Second, "--dump-dom")
	assert.Contains(t, dom, "ringside deployment agent")
	alpha, beta := browsertest.Row(t, dom, "alpha"), browsertest.Row(t, dom, "beta")
	assert.Contains(t, alpha, `class="default">default<`, "alpha is marked as a default worker")
	assert.Contains(t, beta, `class="pill state sundown">sundown<`)
	assert.Equal(t, "0.0", browsertest.Cell(beta, "weight"), "a sundown worker has weight 0")
	w, err := strconv.ParseFloat(browsertest.Cell(alpha, "weight"), 64)
	require.NoError(t, err)
	assert.Greater(t, w, 0.0)
	assert.Regexp(t, `^\d+\.\d$`, browsertest.Cell(alpha, "score"))
	reqA, _ := strconv.Atoi(browsertest.Cell(alpha, "requests"))
	reqB, _ := strconv.Atoi(browsertest.Cell(beta, "requests"))
	assert.Equal(t, 60, reqA+reqB, "request counts from the balancer's reports")
	assert.Contains(t, dom, `<b id="balancers">1</b>`, "one balancer connected")
	assert.Regexp(t, `<li>[^<]*sundown\s+beta`, dom, "the events list names the sundowned worker")
	assert.NotContains(t, dom, `class="stale"`, "the page reached the agent")

	// The time plots (seed 004's Fig. 3): a line per worker over the
	// steps so far, in both; beta's weight ends at 0, the plot's floor.
	for _, id := range []string{"cpu-plot", "weight-plot"} {
		svg := browsertest.Plot(t, dom, id)
		for _, w := range []string{"alpha", "beta"} {
			pts := browsertest.Polyline(t, svg, w)
			assert.GreaterOrEqual(t, len(pts), 2, "%s: %s's line has a point per step", id, w)
		}
		if id == "weight-plot" {
			pts := browsertest.Polyline(t, svg, "beta")
			assert.True(t, strings.HasSuffix(pts[len(pts)-1], ",142.0"), "beta's weight ends at 0: %v", pts[len(pts)-1])
		}
	}
	assert.Regexp(t, `<div id="legend">.*alpha.*beta`, dom)

	// A screenshot for people (kept when RINGSIDE_KEEP_SCREENSHOT names a path).
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	browsertest.Chromium(t, s.srv.URL+"/", 3*time.Second, "--screenshot="+shot, "--window-size=1300,900", "--hide-scrollbars")
	st, err := os.Stat(shot)
	require.NoError(t, err)
	assert.Greater(t, st.Size(), int64(10_000), "a rendered page, not a blank one")
	if keep := os.Getenv("RINGSIDE_KEEP_SCREENSHOT"); keep != "" {
		b, _ := os.ReadFile(shot)
		os.WriteFile(keep, b, 0o644)
	}
}
