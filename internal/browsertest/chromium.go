// Package browsertest renders pages in Debian's headless Chromium for
// tests of what a browser shows (the agent's dashboard).
package browsertest

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Chromium runs headless Chromium on url and returns what it prints (the
// DOM with --dump-dom) after the page's scripts have run for budget
// (virtual time). A missing browser fails the test: CI installs it.
func Chromium(t *testing.T, url string, budget time.Duration, extra ...string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	require.NoError(t, err, "chromium not found (apt-get install chromium)")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=" + strconv.Itoa(int(budget.Milliseconds()))}, extra...)
	out, err := exec.CommandContext(ctx, bin, append(args, url)...).Output()
	require.NoError(t, err)
	return string(out)
}

// Row returns the cells of worker's row in the dashboard's table.
func Row(t *testing.T, dom, worker string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr data-worker="` + regexp.QuoteMeta(worker) + `">(.*?)</tr>`).FindStringSubmatch(dom)
	require.NotNil(t, m, "no row for worker %s in the rendered page", worker)
	return m[1]
}

// Cell returns the text of the cell of class in a row.
func Cell(row, class string) string {
	m := regexp.MustCompile(`<td class="` + class + `">(?:<span[^>]*></span>)?([^<]*)</td>`).FindStringSubmatch(row)
	if m == nil {
		return ""
	}
	return m[1]
}

// Polyline returns the points of worker's line in an SVG plot.
func Polyline(t *testing.T, svg, worker string) []string {
	t.Helper()
	m := regexp.MustCompile(`<polyline data-worker="` + regexp.QuoteMeta(worker) + `" points="([^"]*)"`).FindStringSubmatch(svg)
	require.NotNil(t, m, "no line for worker %s", worker)
	return strings.Fields(m[1])
}

// Plot returns the inside of the dashboard's SVG plot of that id.
func Plot(t *testing.T, dom, id string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<svg class="plot" id="` + regexp.QuoteMeta(id) + `"[^>]*>(.*?)</svg>`).FindStringSubmatch(dom)
	require.NotNil(t, m, "no %s in the rendered page", id)
	return m[1]
}
