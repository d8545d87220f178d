package catalog

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/experiments"
)

// Every experiment's CSV comes from a row type, and every row carries the
// seed of its repetition, so any row can be rerun on its own.
func TestEveryExperimentHasARowTypeWithASeed(t *testing.T) {
	for _, e := range New().All() {
		name := e.Spec().Name
		assert.NotPanics(t, func() {
			cols := experiments.Columns(e)
			assert.True(t, slices.Contains(cols, "seed"), "%s: no seed column in %v", name, cols)
		}, name)
	}
}

// Every report reads hand-edited CSVs without panicking or hanging: each
// column of today's row set to zero, to the largest int64, to a negative
// number and to garbage. A section may fail, with an error; the report is
// still written.
func TestReportsSurviveHostileValues(t *testing.T) {
	for _, v := range []string{"0", "9223372036854775807", "-1", "x\"y", "NaN", "+Inf"} {
		dir := t.TempDir()
		reg := New()
		for _, e := range reg.All() {
			writeRun(t, dir, e, 2, func(int, int) string { return v })
		}
		done := make(chan error, 1)
		go func() { _, err := experiments.WriteReport(dir, reg); done <- err }()
		select {
		case err := <-done:
			if err != nil {
				assert.NotContains(t, err.Error(), "the report failed on this CSV's values", "value %q: a report panicked", v)
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("value %q: the report did not finish", v)
		}
		assert.FileExists(t, filepath.Join(dir, "report.md"))
	}
}

// The output folder is not trusted either: a symlink planted where the
// report, a figure or meta.json will be written is replaced, and the file
// it points at is untouched.
func TestResultsDoNotFollowPlantedSymlinks(t *testing.T) {
	dir := t.TempDir()
	reg := New()
	e := reg.Lookup("ring-messages")
	opts := experiments.RunOptions{Out: dir, Seed: 1, Reps: 1}
	args := []string{"--n", "4,8", "--order", "sorted"}
	_, _, err := experiments.RunArgs(t.Context(), e, args, opts)
	require.NoError(t, err)
	_, err = experiments.WriteReport(dir, reg)
	require.NoError(t, err)

	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o644))
	planted, err := filepath.Glob(filepath.Join(dir, "*.png"))
	require.NoError(t, err)
	require.NotEmpty(t, planted, "the report drew figures")
	planted = append(planted, filepath.Join(dir, "report.md"), filepath.Join(dir, "ring-messages.meta.json"))
	for _, p := range planted {
		require.NoError(t, os.Remove(p))
		require.NoError(t, os.Symlink(victim, p))
	}
	_, _, err = experiments.RunArgs(t.Context(), e, args, opts)
	require.NoError(t, err)
	_, err = experiments.WriteReport(dir, reg)
	require.NoError(t, err)
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(b))
	for _, p := range planted {
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		assert.True(t, fi.Mode().IsRegular(), "%s is a file of its own again", p)
	}
}

// A FIFO planted as an experiment's CSV would block a reader for ever: the
// report names it and goes on with the other experiments.
func TestReportRefusesFilesThatAreNotRegular(t *testing.T) {
	dir := t.TempDir()
	reg := New()
	_, _, err := experiments.RunArgs(t.Context(), reg.Lookup("ring-messages"), []string{"--n", "4", "--order", "sorted"}, experiments.RunOptions{Out: dir, Seed: 1, Reps: 1})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ring-chaos.meta.json"), []byte(`{"experiment":"ring-chaos","reps":1,"seed":1}`), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "ring-chaos.csv"), 0o644))
	done := make(chan error, 1)
	go func() { _, err := experiments.WriteReport(dir, reg); done <- err }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the report blocked on the FIFO")
	}
	require.ErrorContains(t, err, "ring-chaos.csv: not a regular file")
	b, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "## ring-messages", "the other experiment is reported")
}

// Every report on any values: each column of an experiment's CSV takes
// one of two fuzzed values, by the bits of pattern. No report panics (a
// panic becomes "the report failed on this CSV's values") and report.md is
// always written.
func FuzzReports(f *testing.F) {
	f.Add(uint8(0), "0", "9223372036854775807", uint64(0b1010))
	f.Add(uint8(3), "NaN", "-1", uint64(1))
	f.Add(uint8(7), "+Inf", "x\"y", uint64(0))
	reg := New()
	all := reg.All()
	f.Fuzz(func(t *testing.T, which uint8, a, b string, pattern uint64) {
		if strings.ContainsAny(a+b, "\x00\r") {
			return
		}
		e := all[int(which)%len(all)]
		name := e.Spec().Name
		dir := t.TempDir()
		writeRun(t, dir, e, 3, func(r, c int) string {
			if pattern>>((r+c)%64)&1 == 1 {
				return b
			}
			return a
		})
		done := make(chan error, 1)
		go func() { _, err := experiments.WriteReport(dir, reg); done <- err }()
		select {
		case err := <-done:
			if err != nil && strings.Contains(err.Error(), "the report failed on this CSV's values") {
				t.Fatalf("%s: a report panicked on %q / %q: %v", name, a, b, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: the report did not finish on %q / %q", name, a, b)
		}
		assert.FileExists(t, filepath.Join(dir, "report.md"))
	})
}

// writeRun writes what a run of e leaves in dir: its CSV, rows × its
// columns with cell(row, column) in each, and its meta.json.
func writeRun(t *testing.T, dir string, e experiments.Experiment, rows int, cell func(r, c int) string) {
	t.Helper()
	name := e.Spec().Name
	cols := experiments.Columns(e)
	var b strings.Builder
	w := csv.NewWriter(&b)
	w.Write(cols)
	for r := range rows {
		row := make([]string, len(cols))
		for c := range row {
			row[c] = cell(r, c)
		}
		w.Write(row)
	}
	w.Flush()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".csv"), []byte(b.String()), 0o644))
	meta := fmt.Sprintf(`{"experiment":%q,"reps":1,"seed":1,"params":{}}`, name)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".meta.json"), []byte(meta), 0o644))
}
