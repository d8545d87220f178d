package catalog

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
			name := e.Spec().Name
			cols := experiments.Columns(e)
			row := make([]string, len(cols))
			for i := range row {
				row[i] = v
			}
			var b strings.Builder
			w := csv.NewWriter(&b)
			w.Write(cols)
			w.Write(row)
			w.Write(row)
			w.Flush()
			require.NoError(t, os.WriteFile(filepath.Join(dir, name+".csv"), []byte(b.String()), 0o644))
			meta := fmt.Sprintf(`{"experiment":%q,"reps":1,"seed":1,"params":{}}`, name)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name+".meta.json"), []byte(meta), 0o644))
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
