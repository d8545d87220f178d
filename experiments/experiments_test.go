package experiments

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fake is a minimal experiment for framework tests.
type fake struct {
	fallback string // the backend Run falls back to
	fail     error
	tasks    int
	k        int
	extra    bool // also write a second CSV, fake-events.csv
}

type fakeRow struct {
	Task  int           `csv:"task"`
	Value time.Duration `csv:"value_ms"`
	Seed  uint64        `csv:"seed"`
	note  string        // not a column
}

type eventRow struct {
	T     time.Duration `csv:"t_ms"`
	Event string        `csv:"event"`
}

func (*fake) Spec() Spec {
	return Spec{Name: "fake", Summary: "a fake", Backends: []string{"sim", "local"}, Quick: 3, Paper: 9, Row: fakeRow{}}
}
func (f *fake) Flags(fs *flag.FlagSet) { fs.IntVar(&f.k, "k", 2, "multiplier") }
func (f *fake) Run(ctx context.Context, env *Env) error {
	if f.fallback != "" {
		env.Backend = f.fallback
	}
	if f.extra {
		ev, err := env.CSV("events", eventRow{})
		if err != nil {
			return err
		}
		if err := ev.Write(eventRow{time.Second, "start"}); err != nil {
			return err
		}
		if err := ev.Write(fakeRow{}); err == nil {
			return errors.New("a row of another type must be refused")
		}
	}
	return RunGrid(ctx, env, Grid{Cells: f.tasks, Parallel: AllCPUs}, func(_ context.Context, t Task) ([]fakeRow, error) {
		i := t.Cell*env.Reps + t.Rep
		if f.fail != nil && i == 5 {
			return nil, f.fail
		}
		return []fakeRow{{Task: i, Value: time.Duration(i*f.k) * time.Millisecond, Seed: t.Seed, note: "x"}}, nil
	})
}
func (*fake) Report(in *ReportInput) (string, error) {
	s := Summarize(in.Table.Floats(allRows(in.Table), "value_ms"))
	return "mean " + Num(s.Mean, 3) + "\n", nil
}

func allRows(t *Table) []int {
	out := make([]int, len(t.Rows))
	for i := range out {
		out[i] = i
	}
	return out
}

func TestRunWritesOrderedCSVAndMeta(t *testing.T) {
	dir := t.TempDir()
	f := &fake{tasks: 4}
	fs := NewFlagSet(f)
	require.NoError(t, fs.Parse([]string{"-k", "3"}))
	meta, err := Run(context.Background(), f, fs, RunOptions{Seed: 9, Out: dir, Profile: ProfilePaper})
	require.NoError(t, err)
	assert.Equal(t, 36, meta.Rows)
	assert.Equal(t, "sim", meta.Backend)
	assert.Equal(t, 9, meta.Reps)
	assert.Equal(t, "3", meta.Params["k"])
	assert.NotEmpty(t, meta.GitCommit)

	b, err := os.ReadFile(filepath.Join(dir, "fake.csv"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 37)
	assert.Equal(t, "task,value_ms,seed", lines[0])
	assert.Equal(t, fmt.Sprintf("0,0,%d", SubSeed(9, 0)), lines[1])
	assert.Equal(t, fmt.Sprintf("35,105,%d", SubSeed(9, 35)), lines[36], "rows in task order, durations in ms, each with its task's seed")
	assert.FileExists(t, filepath.Join(dir, "fake.meta.json"))

	reg := &Registry{}
	reg.Register(f)
	path, err := WriteReport(dir, reg)
	require.NoError(t, err)
	md, _ := os.ReadFile(path)
	assert.Contains(t, string(md), "## fake")
	assert.Contains(t, string(md), "mean 52.5")
	assert.Contains(t, string(md), "*seed* 9")
}

func TestFailedRunKeepsLastGoodCSV(t *testing.T) {
	dir := t.TempDir()
	good := &fake{tasks: 2}
	_, err := Run(context.Background(), good, NewFlagSet(good), RunOptions{Out: dir})
	require.NoError(t, err)
	before, _ := os.ReadFile(filepath.Join(dir, "fake.csv"))

	bad := &fake{tasks: 4, fail: errors.New("boom")}
	_, err = Run(context.Background(), bad, NewFlagSet(bad), RunOptions{Out: dir})
	require.ErrorContains(t, err, "cell 1 rep 2: boom")
	after, _ := os.ReadFile(filepath.Join(dir, "fake.csv"))
	assert.Equal(t, before, after)
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".fake.csv.*"))
	assert.Empty(t, leftovers)
}

func TestExtraCSVIsInstalledWithTheRun(t *testing.T) {
	dir := t.TempDir()
	good := &fake{tasks: 1, extra: true}
	_, err := Run(context.Background(), good, NewFlagSet(good), RunOptions{Out: dir})
	require.NoError(t, err)
	events := filepath.Join(dir, "fake-events.csv")
	b, err := os.ReadFile(events)
	require.NoError(t, err)
	assert.Equal(t, "t_ms,event\n1000,start\n", string(b))

	// A failed run leaves the last good extra CSV, and no temporary file.
	require.NoError(t, os.WriteFile(events, []byte("t_ms,event\n1,kept\n"), 0o644))
	bad := &fake{tasks: 4, fail: errors.New("boom"), extra: true}
	_, err = Run(context.Background(), bad, NewFlagSet(bad), RunOptions{Out: dir})
	require.Error(t, err)
	b, _ = os.ReadFile(events)
	assert.Equal(t, "t_ms,event\n1,kept\n", string(b))
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".fake*"))
	assert.Empty(t, leftovers)
}

func TestMetaRecordsTheBackendUsed(t *testing.T) {
	dir := t.TempDir()
	f := &fake{tasks: 1, fallback: "local"}
	meta, err := Run(context.Background(), f, NewFlagSet(f), RunOptions{Out: dir, Backend: "sim"})
	require.NoError(t, err)
	assert.Equal(t, "local", meta.Backend)
	assert.Equal(t, "sim", meta.Requested)
	reg := &Registry{}
	reg.Register(f)
	path, err := WriteReport(dir, reg)
	require.NoError(t, err)
	md, _ := os.ReadFile(path)
	assert.Contains(t, string(md), "*backend* `local` (fell back from `sim`), *profile*")

	meta, err = Run(context.Background(), &fake{tasks: 1}, nil, RunOptions{Out: dir, Backend: "sim"})
	require.NoError(t, err)
	assert.Equal(t, "sim", meta.Backend)
	assert.Empty(t, meta.Requested)
}

func TestSplitKeepsOrderOfAppearance(t *testing.T) {
	tb, err := ReadTable(strings.NewReader("rep,v\n1,a\n0,b\n1,c\n2,d\n0,e\n"))
	require.NoError(t, err)
	assert.Equal(t, [][]int{{0, 2}, {1, 4}, {3}}, tb.Split([]int{0, 1, 2, 3, 4}, "rep"))
	assert.Equal(t, [][]int{{4}, {3}}, tb.Split([]int{4, 3}, "rep"))
	assert.Empty(t, tb.Split(nil, "rep"))
}

func TestSpecReps(t *testing.T) {
	assert.Equal(t, 3, Spec{Quick: 3}.Reps(ProfilePaper), "paper defaults to quick")
	assert.Equal(t, 9, Spec{Quick: 3, Paper: 9}.Reps(ProfilePaper))
	assert.Equal(t, 3, Spec{Quick: 3, Paper: 9}.Reps(ProfileQuick))
}

func TestSubSeedIsStableAndSpread(t *testing.T) {
	// Pinned: every simulated CSV depends on these values (the same as
	// ring/sim's derivation before it moved here).
	assert.Equal(t, uint64(16860738450190168606), SubSeed(1, 0))
	assert.Equal(t, uint64(14486435440272157817), SubSeed(42, 7))
	seen := map[uint64]bool{}
	for i := range 1000 {
		seen[SubSeed(7, i)] = true
	}
	assert.Len(t, seen, 1000)
	assert.NotEqual(t, SubSeed(1, 0), SubSeed(2, 0))
}

func TestRunRejectsBadOptions(t *testing.T) {
	f := &fake{tasks: 1}
	_, err := Run(context.Background(), f, nil, RunOptions{Out: t.TempDir(), Backend: "kube"})
	assert.ErrorContains(t, err, `backend "kube" not supported (want one of sim, local)`)
	_, err = Run(context.Background(), f, nil, RunOptions{Out: t.TempDir(), Profile: "slow"})
	assert.ErrorContains(t, err, `profile "slow"`)
	_, err = Run(context.Background(), f, nil, RunOptions{Out: t.TempDir(), Reps: -1})
	assert.ErrorContains(t, err, "negative")
}

func TestCancelledRunFails(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := &fake{tasks: 100}
	_, err := Run(ctx, f, nil, RunOptions{Out: t.TempDir()})
	assert.ErrorContains(t, err, "interrupted")
}

func TestSinkWritesItsRowTypeOnly(t *testing.T) {
	type ab struct {
		A int     `csv:"a"`
		B float64 `csv:"b"`
	}
	var b bytes.Buffer
	s, err := NewSink(&b, ab{})
	require.NoError(t, err)
	require.NoError(t, s.Write(ab{1, 0.5}))
	require.NoError(t, s.Write(&ab{2, 1}))
	assert.ErrorContains(t, s.Write(eventRow{}), "csv row 3: got a row of type experiments.eventRow, but the file's header is a,b")
	assert.ErrorContains(t, s.Write(nil), "csv row 3: no row (nil)")
	require.NoError(t, s.Flush())
	assert.Equal(t, "a,b\n1,0.5\n2,1\n", b.String())
}

func TestRowTypesAreChecked(t *testing.T) {
	for name, row := range map[string]any{
		"not a struct": 3,
		"no columns":   struct{ A int }{},
		"duration without unit": struct {
			D time.Duration `csv:"took"`
		}{},
		"column twice": struct {
			A int `csv:"a"`
			B int `csv:"a"`
		}{},
		"comma in name": struct {
			A int `csv:"a,b"`
		}{},
	} {
		_, err := NewSink(io.Discard, row)
		assert.Error(t, err, name)
	}
	type shared struct {
		X int `csv:"x"`
	}
	type withShared struct {
		A int `csv:"a"`
		shared
		B int `csv:"b"`
	}
	assert.Equal(t, []string{"a", "x", "b"}, Header(withShared{}), "an embedded struct lends its columns in place")
}

func TestTableNamesAMissingColumn(t *testing.T) {
	tb, err := ReadTable(strings.NewReader("a,b\n1,2\n"))
	require.NoError(t, err)
	require.NoError(t, tb.Err())
	assert.Equal(t, 2.0, tb.Float(0, "b"))
	assert.True(t, math.IsNaN(tb.Float(0, "bb")))
	assert.ErrorContains(t, tb.Err(), `csv has no column "bb" (columns: a, b)`)
}

func TestGridSeedsAndCosts(t *testing.T) {
	g := Grid{Cells: 6, SameSeed: 3}
	assert.Equal(t, g.Seed(7, 4, 0, 2), g.Seed(7, 4, 2, 2), "cells of one group share seeds")
	assert.Equal(t, SubSeed(7, 1*4+2), g.Seed(7, 4, 3, 2))
	assert.Equal(t, SubSeed(7, 5*4+1), Grid{Cells: 6}.Seed(7, 4, 5, 1))

	// The most tasks that ran at once under a budget of 4 units, each task
	// yielding while it runs so that tasks allowed to overlap do.
	most := func(cost int) int32 {
		main, err := createCSV(t.TempDir(), "x", fakeRow{})
		require.NoError(t, err)
		defer main.close(false)
		env := &Env{Seed: 1, Reps: 3, Progress: NewProgress(io.Discard, false, "x", 0), main: main}
		var running, most atomic.Int32
		err = RunGrid(context.Background(), env, Grid{Cells: 4, Parallel: 4, Cost: func(int) int { return cost }},
			func(_ context.Context, tk Task) ([]fakeRow, error) {
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				for range 2000 {
					runtime.Gosched()
				}
				running.Add(-1)
				return []fakeRow{{Task: tk.Cell*3 + tk.Rep}}, nil
			})
		require.NoError(t, err)
		assert.Equal(t, 12, main.Rows())
		return most.Load()
	}
	assert.Equal(t, int32(1), most(3), "tasks of 3 units: never two at once")
	assert.LessOrEqual(t, most(2), int32(2), "tasks of 2 units: at most two at once")
}

// Interleaved, every configuration runs once per repetition, in turn,
// with the seeds it has in cell order.
func TestGridInterleaves(t *testing.T) {
	for _, interleave := range []bool{false, true} {
		main, err := createCSV(t.TempDir(), "x", fakeRow{})
		require.NoError(t, err)
		env := &Env{Seed: 1, Reps: 3, Progress: NewProgress(io.Discard, false, "x", 0), main: main}
		g := Grid{Cells: 2, Interleave: interleave}
		var order []Task
		err = RunGrid(context.Background(), env, g, func(_ context.Context, tk Task) ([]fakeRow, error) {
			order = append(order, tk)
			assert.Equal(t, g.Seed(1, 3, tk.Cell, tk.Rep), tk.Seed)
			return nil, nil
		})
		require.NoError(t, err)
		main.close(false)
		var got []int
		for _, tk := range order {
			got = append(got, tk.Cell*10+tk.Rep)
		}
		want := []int{0, 1, 2, 10, 11, 12}
		if interleave {
			want = []int{0, 10, 1, 11, 2, 12}
		}
		assert.Equal(t, want, got, "interleave %v", interleave)
	}
}

func TestProgressStyles(t *testing.T) {
	var plain bytes.Buffer
	p := NewProgress(&plain, false, "x", 20)
	for range 20 {
		p.Add(1)
	}
	p.Finish()
	out := plain.String()
	assert.Equal(t, 11, strings.Count(out, "\n"), "ten plain lines plus the summary:\n%s", out)
	assert.NotContains(t, out, "\r")

	var tty bytes.Buffer
	p = NewProgress(&tty, true, "x", 4)
	p.Add(2)
	assert.Contains(t, tty.String(), "\rx [###############...............]  50% 2/4")
}

func TestReportErrors(t *testing.T) {
	_, err := WriteReport(t.TempDir(), &Registry{})
	assert.ErrorContains(t, err, "no *.meta.json")

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fake.meta.json"), []byte(`{"experiment":"fake"}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fake.csv"), []byte("task\n1\n"), 0o644))
	reg := &Registry{}
	reg.Register(&fake{})
	_, err = WriteReport(dir, reg)
	assert.ErrorContains(t, err, `csv has no column "value_ms"`)
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	assert.Contains(t, string(md), "report failed")

	// A CSV from before the seed column was added still reports: only the
	// columns a report reads must be there.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fake.csv"), []byte("task,value_ms\n1,4\n"), 0o644))
	_, err = WriteReport(dir, reg)
	require.NoError(t, err)
	md, _ = os.ReadFile(filepath.Join(dir, "report.md"))
	assert.Contains(t, string(md), "mean 4")
}

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{4, 1, 3, 2})
	assert.Equal(t, 2.5, s.Mean)
	assert.Equal(t, 1.0, s.Min)
	assert.Equal(t, 4.0, s.Max)
	assert.Equal(t, 2.0, s.P50)
	assert.InDelta(t, 1.291, s.Std, 1e-3)
	assert.Equal(t, "–", Num(Summarize(nil).Mean, 2))
	assert.Equal(t, 0.0, Summarize([]float64{7}).Std)
}

func TestJudgeNeedsTheSpreadToAgree(t *testing.T) {
	atLeast2 := func(x float64) bool { return x >= 2 }
	assert.Equal(t, "met (all 3 repetitions, 2.1–3)", Judge([]float64{2.1, 3, 2.5}, atLeast2))
	assert.Equal(t, "**missed** (all 2 repetitions, 1–1.5)", Judge([]float64{1, 1.5}, atLeast2))
	assert.Equal(t, "inconclusive (1 of 2 repetitions, 1.9–2.2)", Judge([]float64{1.9, 2.2}, atLeast2))
	assert.Contains(t, Judge([]float64{10}, atLeast2), "inconclusive (one repetition: 10", "no spread, no verdict")
	assert.Equal(t, "–", Judge([]float64{math.NaN()}, atLeast2))
	assert.Equal(t, []float64{2, 0.5}, Ratios([]float64{4, 1, 9}, []float64{2, 2}))
}

// RunCells gives a cell's repetitions the seeds RunGrid gives them, and a
// cell may run fewer than env.Reps.
func TestRunCellsSeedsAsRunGrid(t *testing.T) {
	main, err := createCSV(t.TempDir(), "x", fakeRow{})
	require.NoError(t, err)
	defer main.close(false)
	env := &Env{Seed: 9, Reps: 4, Progress: NewProgress(io.Discard, false, "x", 0), main: main}
	g := Grid{Cells: 4, SameSeed: 2, Parallel: AllCPUs}
	ran := make([]int, g.Cells)
	err = RunCells(context.Background(), env, g, func(_ context.Context, cell int, seed func(int) uint64) ([]fakeRow, error) {
		for rep := range cell + 1 {
			assert.Equal(t, g.Seed(9, 4, cell, rep), seed(rep), "cell %d rep %d", cell, rep)
			ran[cell]++
		}
		return []fakeRow{{Task: cell}}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3, 4}, ran)
	assert.Equal(t, 4, main.Rows(), "one task per cell")
	assert.Equal(t, 4, env.Reps, "the caller's env is untouched")
}

// kind, the kube experiments' old name for their Pods backend, is the
// kubernetes backend wherever a backend is named.
func TestOldBackendNames(t *testing.T) {
	assert.Equal(t, "kubernetes", CanonicalBackend("kind"))
	assert.Equal(t, "sim", CanonicalBackend("sim"))
	require.Error(t, CheckBackend(&fake{}, "kind"), "fake has no kubernetes backend")
	require.NoError(t, CheckBackend(&fake{}, "sim"))
	require.NoError(t, CheckBackend(&onKubernetes{}, "kind"), "kind names the kubernetes backend")
}

// onKubernetes is fake with a kubernetes backend.
type onKubernetes struct{ fake }

func (*onKubernetes) Spec() Spec {
	s := (&fake{}).Spec()
	s.Backends = []string{"sim", "kubernetes"}
	return s
}
