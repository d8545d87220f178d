package experiments

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// ReportInput is what an experiment's Report gets.
type ReportInput struct {
	Meta  Meta
	Table *Table
	Dir   string // where plots go; reference them by base name
}

// ExtraTable reads the run's second CSV of that suffix (Env.CSV).
func (in *ReportInput) ExtraTable(suffix string) (*Table, error) {
	f, err := openResult(filepath.Join(in.Dir, in.Meta.Experiment+"-"+suffix+".csv"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadTable(f)
}

// WithParent returns the table with the rows of the same experiment's CSV
// in the parent folder appended, when there is one with the same columns:
// the runs `ringside cluster` copied into results/kubernetes beside the
// host's in results/, so that a report sets one backend's figures beside
// the others'. The second value names the parent CSV it read ("" if
// none).
func (in *ReportInput) WithParent() (*Table, string) {
	path := filepath.Join(filepath.Dir(filepath.Clean(in.Dir)), in.Meta.Experiment+".csv")
	f, err := openResult(path)
	if err != nil {
		return in.Table, ""
	}
	defer f.Close()
	parent, err := ReadTable(f)
	if err != nil || !slices.Equal(parent.Header, in.Table.Header) {
		return in.Table, ""
	}
	merged := *in.Table
	merged.Rows = append(slices.Clip(parent.Rows), in.Table.Rows...)
	return &merged, path
}

// maxResultFile bounds a results file the report reads whole: far above
// any CSV the catalogue writes (the paper profile's largest is tens of MB).
const maxResultFile = 2 << 30

// openResult opens a file of the results folder for reading. The folder
// is not trusted: a FIFO or device planted there would block or never
// end, so only a regular file is opened.
func openResult(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", filepath.Base(path), fi.Mode().Type())
	}
	if fi.Size() > maxResultFile {
		return nil, fmt.Errorf("%s: %d bytes, over the %d a results file may have", filepath.Base(path), fi.Size(), int64(maxResultFile))
	}
	return os.Open(path)
}

// Figure draws a figure of this experiment, DIR/EXPERIMENT-name.png (and
// its SVG), with draw, and returns the markdown that shows it, alt its
// text: `in.Figure("latency", "latency vs n", experiments.Line(axes, lines.List))`.
func (in *ReportInput) Figure(name, alt string, draw func(path string) error) (string, error) {
	base := in.Meta.Experiment + "-" + name + ".png"
	if err := draw(filepath.Join(in.Dir, base)); err != nil {
		return "", fmt.Errorf("figure %s: %w", name, err)
	}
	return fmt.Sprintf("![%s](%s)", alt, base), nil
}

// Line, Bar and Hist are the drawings Figure takes.
func Line(ax Axes, series []Series) func(string) error {
	return func(path string) error { return LinePlot(path, ax, series) }
}

func Bar(ax Axes, groups []string, series []Series) func(string) error {
	return func(path string) error { return Bars(path, ax, groups, series) }
}

func Hist(ax Axes, values []float64, bins int) func(string) error {
	return func(path string) error { return Histogram(path, ax, values, bins) }
}

// WriteReport reads every DIR/*.meta.json with its CSV and writes
// DIR/report.md, one section per experiment in catalogue order.
func WriteReport(dir string, reg *Registry) (string, error) {
	metas, err := filepath.Glob(filepath.Join(dir, "*.meta.json"))
	if err != nil {
		return "", err
	}
	if len(metas) == 0 {
		return "", fmt.Errorf("report %s: no *.meta.json here; run an experiment with --out %s first", dir, dir)
	}
	order := map[string]int{}
	for i, n := range reg.Names() {
		order[n] = i
	}
	sort.SliceStable(metas, func(i, j int) bool {
		return rank(order, metas[i]) < rank(order, metas[j])
	})

	var b strings.Builder
	b.WriteString("# ringside report\n\n")
	b.WriteString("Each section summarises one experiment's CSV in this directory; `*.meta.json` holds the exact parameters. Reference values (theory or the source paper) stand beside the measured ones.\n\n")
	var errs []error
	for _, mp := range metas {
		sec, err := reportOne(mp, dir, reg)
		if err != nil {
			errs = append(errs, err)
			fmt.Fprintf(&b, "## %s\n\nreport failed: %v\n\n", strings.TrimSuffix(filepath.Base(mp), ".meta.json"), err)
			continue
		}
		b.WriteString(sec)
	}
	out := filepath.Join(dir, "report.md")
	if err := WriteFile(out, []byte(b.String())); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	return out, errors.Join(errs...)
}

func rank(order map[string]int, metaPath string) int {
	if r, ok := order[strings.TrimSuffix(filepath.Base(metaPath), ".meta.json")]; ok {
		return r
	}
	return len(order)
}

// safeReport runs e's report on what may be a hand-edited CSV: a report
// that panics on values it did not expect (a plotting library's log axis
// on a zero) fails its own section with an error instead of the whole
// command.
func safeReport(e Experiment, in *ReportInput) (body string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the report failed on this CSV's values: %v", r)
		}
	}()
	return e.Report(in)
}

func reportOne(metaPath, dir string, reg *Registry) (string, error) {
	mf, err := openResult(metaPath)
	if err != nil {
		return "", err
	}
	raw, err := io.ReadAll(io.LimitReader(mf, 1<<20))
	mf.Close()
	if err != nil {
		return "", err
	}
	var meta Meta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return "", fmt.Errorf("%s: %w", filepath.Base(metaPath), err)
	}
	e := reg.Lookup(meta.Experiment)
	if e == nil {
		return "", fmt.Errorf("%s: unknown experiment %q", filepath.Base(metaPath), meta.Experiment)
	}
	f, err := openResult(filepath.Join(dir, meta.Experiment+".csv"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	t, err := ReadTable(f)
	if err != nil {
		return "", fmt.Errorf("%s.csv: %w", meta.Experiment, err)
	}
	// The columns the report reads must be there (Table.Err), not every
	// column of today's row type: a CSV from before a column was added
	// still reports.
	body, err := safeReport(e, &ReportInput{Meta: meta, Table: t, Dir: dir})
	if err == nil {
		err = t.Err()
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", meta.Experiment, err)
	}
	head := fmt.Sprintf("## %s\n\n%s\n\n*backend* %s, *profile* `%s`, *seed* %d, *reps* %d, %d rows, commit `%s`, %s, took %s.\n\n",
		meta.Experiment, e.Spec().Summary, backendNote(meta), meta.Profile, meta.Seed, meta.Reps, meta.Rows,
		short(meta.GitCommit), meta.GoVersion, meta.End.Sub(meta.Start).Round(1e6))
	return head + body + "\n", nil
}

func short(commit string) string {
	if len(commit) > 12 && !strings.HasSuffix(commit, "-dirty") {
		return commit[:12]
	}
	return commit
}

// backendNote names the backend a run used, and the one asked for when it
// fell back.
func backendNote(m Meta) string {
	if m.Requested != "" && m.Requested != m.Backend {
		return "`" + m.Backend + "` (fell back from `" + m.Requested + "`)"
	}
	return "`" + m.Backend + "`"
}
