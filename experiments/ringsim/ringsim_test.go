package ringsim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/ring"
)

func run(t *testing.T, e experiments.Experiment, dir string, seed uint64, reps int, args ...string) []byte {
	t.Helper()
	_, raw, err := experiments.RunArgs(context.Background(), e, args, experiments.RunOptions{Seed: seed, Reps: reps, Out: dir})
	require.NoError(t, err)
	return raw
}

func TestSameSeedSameCSVBytes(t *testing.T) {
	for _, tc := range []struct {
		e    experiments.Experiment
		args []string
	}{
		{&Messages{}, []string{"--n", "4,16,32", "--order", "sorted,random,reverse"}},
		{&Chaos{}, []string{"--n", "8"}},
		{&FailoverSim{}, []string{"--n", "4,16,64"}},
	} {
		a := run(t, tc.e, t.TempDir(), 7, 30, tc.args...)
		b := run(t, tc.e, t.TempDir(), 7, 30, tc.args...)
		c := run(t, tc.e, t.TempDir(), 8, 30, tc.args...)
		assert.Equal(t, a, b, "%s: same seed must give identical bytes", tc.e.Spec().Name)
		assert.NotEqual(t, a, c, "%s: another seed must differ", tc.e.Spec().Name)
	}
}

func TestMessagesCSVAndReport(t *testing.T) {
	dir := t.TempDir()
	e := &Messages{}
	csv := run(t, e, dir, 1, 50, "--n", "4,8,16", "--order", "sorted,random,reverse", "--algorithm", "chang-roberts")
	tab, err := experiments.ReadTable(bytes.NewReader(csv))
	require.NoError(t, err)
	require.Len(t, tab.Rows, 3*3*2*50)
	for i := range tab.Rows {
		n := tab.Float(i, "n")
		assert.Equal(t, "true", tab.Str(i, "leader_is_max"))
		assert.Equal(t, n, tab.Float(i, "elected_msgs"))
		if tab.Str(i, "initiators") == InitOne {
			assert.Equal(t, n+tab.Float(i, "max_distance"), tab.Float(i, "election_msgs"))
		} else {
			switch tab.Str(i, "order") {
			case "sorted":
				assert.Equal(t, 2*n-1, tab.Float(i, "election_msgs"))
			case "reverse":
				assert.Equal(t, n*(n+1)/2, tab.Float(i, "election_msgs"))
			}
		}
	}
	reg := &experiments.Registry{}
	reg.Register(e)
	path, err := experiments.WriteReport(dir, reg)
	require.NoError(t, err)
	md, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(md), "worst n(n+1)/2")
	assert.Contains(t, string(md), "| chang-roberts | all | reverse | 16 | 50 | 136 |")
	assert.Contains(t, string(md), "| chang-roberts | all | sorted | 8 | 50 | 15 |")
	assert.FileExists(t, filepath.Join(dir, "ring-messages-messages.png"))
}

// A cell stops once it has spent its budget — after two repetitions at
// least, and for a cell held against an exact form only once its mean is
// known to 0.5 %.
func TestCellBudget(t *testing.T) {
	repsOf := func(b cellBudget, msgs func(rep int) int) int {
		for rep := range 200 {
			if b.spend(msgs(rep)) {
				return rep + 1
			}
		}
		return 200
	}
	steady := func(int) int { return 4096 }
	assert.Equal(t, 5, repsOf(newCellBudget(20, 1000, false), steady), "spent after five")
	assert.Equal(t, 5, repsOf(newCellBudget(20, 1000, true), steady), "no spread: precise at once")
	assert.Equal(t, 2, repsOf(newCellBudget(20, 1000, true), func(int) int { return 1 << 20 }), "never fewer than two")
	// Alternating 80 and 120: mean 100, sd ≈ 20, so 0.5 % of the mean
	// takes n ≥ (20/0.5)² = 1,600 repetitions — all 200 are run, though
	// the budget of 20·1,000 was spent after about 200.
	noisy := func(rep int) int { return 80 + 40*(rep%2) }
	assert.Equal(t, 200, repsOf(newCellBudget(20, 1000, true), noisy))
	assert.Equal(t, 200, repsOf(newCellBudget(20, 1000, false), noisy), "the budget lasts 200 repetitions")
	assert.Equal(t, 20, repsOf(newCellBudget(20, 100, false), noisy), "a tenth of the budget: spent after 20")
}

// Every algorithm side by side: Chang–Roberts' rows are those it writes
// alone, LeLann's count is n², no run exceeds its bound, and a costly cell
// runs fewer repetitions.
func TestMessagesEveryAlgorithm(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--n", "4,16,64", "--order", "sorted,random"}
	all := run(t, &Messages{}, dir, 5, 20, append(args, "--max-messages", "1000")...)
	alone := run(t, &Messages{}, t.TempDir(), 5, 20, append(args, "--algorithm", "chang-roberts", "--max-messages", "1000")...)
	tab, err := experiments.ReadTable(bytes.NewReader(all))
	require.NoError(t, err)
	var cr []string
	reps := map[string]int{}
	for i := range tab.Rows {
		alg, _ := ring.Lookup(tab.Str(i, "algorithm"))
		n := tab.Float(i, "n")
		assert.Equal(t, "true", tab.Str(i, "leader_is_max"), "%s n=%v", alg.Name, n)
		assert.LessOrEqual(t, tab.Float(i, "election_msgs"), float64(alg.Bound(int(n))), "%s n=%v", alg.Name, n)
		if alg.Name == "lelann" {
			assert.Equal(t, n*n, tab.Float(i, "election_msgs"))
		}
		if alg.Name == ring.ChangRoberts {
			cr = append(cr, strings.Join(tab.Rows[i], ","))
		}
		reps[fmt.Sprintf("%s %v %s %s", alg.Name, n, tab.Str(i, "order"), tab.Str(i, "initiators"))]++
	}
	lines := strings.Split(strings.TrimSpace(string(alone)), "\n")[1:]
	assert.Equal(t, lines, cr, "Chang–Roberts' rows do not depend on the other algorithms")
	assert.Equal(t, 5, reps["lelann 64 sorted all"], "4,096 messages a run, no spread: it stops once past 20·1,000, after ⌈20,000/4,096⌉ repetitions")
	assert.Equal(t, 20, reps["dkr 16 random all"], "a cheap cell runs them all")

	reg := &experiments.Registry{}
	reg.Register(&Messages{})
	path, err := experiments.WriteReport(dir, reg)
	require.NoError(t, err)
	md, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(md), "| lelann | all | random | 16 | 20 | 256 | 0 | 256 | 256 | 256 | 100% | 256 (n²) | 0% |")
	assert.Contains(t, string(md), "Runs above their algorithm's worst-case bound: **none**")
	for _, f := range []string{"messages", "time", "chang-roberts"} {
		assert.FileExists(t, filepath.Join(dir, "ring-messages-"+f+".png"))
	}
}

func TestChaosHasNoViolations(t *testing.T) {
	dir := t.TempDir()
	e := &Chaos{}
	csv := run(t, e, dir, 3, 200, "--max-crashes", "4", "--loss", "0.05")
	tab, err := experiments.ReadTable(bytes.NewReader(csv))
	require.NoError(t, err)
	algs := len(ring.AlgorithmNames())
	require.Equal(t, 200*algs, len(tab.Rows), "every algorithm, 200 runs each")
	crashes := map[string]string{}
	for i := range tab.Rows {
		require.Equal(t, "true", tab.Str(i, "one_leader"), "row %d", i)
		require.Equal(t, "true", tab.Str(i, "leader_is_max_live"), "row %d", i)
		rep := tab.Str(i, "rep")
		if c, ok := crashes[rep]; ok {
			require.Equal(t, c, tab.Str(i, "extra_crashes"), "rep %s: every algorithm meets the same faults", rep)
		}
		crashes[rep] = tab.Str(i, "extra_crashes")
	}
	reg := &experiments.Registry{}
	reg.Register(e)
	path, err := experiments.WriteReport(dir, reg)
	require.NoError(t, err)
	md, _ := os.ReadFile(path)
	assert.Contains(t, string(md), fmt.Sprintf("**Violations: 0 of %d runs**", 200*algs))
}

func TestBadParametersAreRejected(t *testing.T) {
	for _, tc := range []struct {
		e    experiments.Experiment
		args []string
		want string
	}{
		{&Messages{}, []string{"--n", "4,x"}, `"x" is not a positive integer`},
		{&Messages{}, []string{"--order", "spiral"}, `"spiral": want one of`},
		{&Chaos{}, []string{"--loss", "1.2"}, "loss=1.2"},
		{&Chaos{}, []string{"--n", "1"}, "at least 2"},
		{&Chaos{}, []string{"--heartbeat", "1s"}, "want 0 < heartbeat < suspect"},
	} {
		fs := experiments.NewFlagSet(tc.e)
		err := fs.Parse(tc.args)
		if err == nil {
			_, err = experiments.Run(context.Background(), tc.e, fs, experiments.RunOptions{Reps: 1, Out: t.TempDir()})
		}
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// The simulated failover runs ringnode's cores: on a sorted ring the max
// live UID always wins, exactly one server coordinates, and the phases
// follow each other as they do on the network.
func TestFailoverSimRows(t *testing.T) {
	csv := run(t, &FailoverSim{}, t.TempDir(), 3, 20, "--n", "3,16,128", "--algorithm", "all", "--max-messages", "1000000")
	tab, err := experiments.ReadTable(bytes.NewReader(csv))
	require.NoError(t, err)
	algs := len(ring.AlgorithmNames())
	require.Equal(t, 3*20*algs, len(tab.Rows))
	for _, g := range tab.GroupBy("n", "algorithm") {
		assert.Len(t, g.Rows, 20, "n=%s %s", g.Key[0], g.Key[1])
	}
	for i := range tab.Rows {
		alg, err := ring.Lookup(tab.Str(i, "algorithm"))
		require.NoError(t, err)
		assert.Equal(t, "sim", tab.Str(i, "backend"))
		assert.Equal(t, "true", tab.Str(i, "new_is_max_live"), "row %d", i)
		assert.Equal(t, "1", tab.Str(i, "coordinators"), "row %d", i)
		detect, prop := tab.Float(i, "detect_ms"), tab.Float(i, "propagation_ms")
		// The 700 ms detector, counted from the last heartbeat heard: at
		// most one 100 ms interval before the crash, or one still in
		// flight when it happened (a link's delay, under 1 ms here).
		assert.Greater(t, detect, 600.0, "row %d", i)
		assert.Less(t, detect, 701.0, "row %d", i)
		if alg.Topology == ring.Complete {
			// The winner tells the other survivors directly.
			assert.Equal(t, tab.Float(i, "n")-2, tab.Float(i, "elected_msgs"), "row %d", i)
			continue
		}
		assert.GreaterOrEqual(t, tab.Float(i, "metadata_ms"), detect, "row %d", i)
		if alg.Name != "dkr" {
			// The winner takes the role over when its announcement is
			// back; Dolev–Klawe–Rodeh's winner learns it from another
			// member's announcement on its way round, and pushes sooner.
			assert.GreaterOrEqual(t, tab.Float(i, "metadata_ms"), detect+prop, "row %d", i)
		}
		assert.Equal(t, tab.Float(i, "n")-1, tab.Float(i, "elected_msgs"), "row %d %s: the announcement once round the survivors", i, alg.Name)
	}
}
