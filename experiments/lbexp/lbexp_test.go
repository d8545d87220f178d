package lbexp

import (
	"bytes"
	"context"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/balancer/pick"
	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/internal/redistest"
)

func run(t *testing.T, e experiments.Experiment, dir string, seed uint64, reps int, args ...string) []byte {
	t.Helper()
	_, raw, err := experiments.RunArgs(context.Background(), e, args, experiments.RunOptions{Seed: seed, Reps: reps, Out: dir})
	require.NoError(t, err)
	return raw
}

func TestEfficiencyDeterministic(t *testing.T) {
	a := run(t, &Efficiency{}, t.TempDir(), 3, 20)
	b := run(t, &Efficiency{}, t.TempDir(), 3, 20)
	c := run(t, &Efficiency{}, t.TempDir(), 4, 20)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)
}

func TestEfficiencyTargetsAndReport(t *testing.T) {
	dir := t.TempDir()
	csv := run(t, &Efficiency{}, dir, 1, 50)
	tab, err := experiments.ReadTable(bytes.NewReader(csv))
	require.NoError(t, err)
	require.Len(t, tab.Rows, len(pick.WeightFollowing)*2*50*4)
	etas := map[string][]float64{}
	for _, g := range tab.GroupBy("picker", "weight_set", "rep") {
		var r []int
		var w []float64
		total := 0
		for _, i := range g.Rows {
			r = append(r, int(tab.Float(i, "requests")))
			w = append(w, tab.Float(i, "weight"))
			total += r[len(r)-1]
		}
		require.Equal(t, 10_000, total)
		etas[g.Key[0]+" "+g.Key[1]] = append(etas[g.Key[0]+" "+g.Key[1]], Eta(r, w))
	}
	// Smooth WRR: η ≥ 0.99 on both sets (issue target), every seed.
	for _, set := range []string{"100/50/25/5", "100/95/90/85"} {
		for _, eta := range etas["smooth-wrr "+set] {
			assert.GreaterOrEqual(t, eta, 0.99, set)
		}
	}
	// Round robin ignores weights: η = min/max exactly.
	assert.InDelta(t, 0.05, etas["round-robin 100/50/25/5"][0], 1e-9)
	// Weighted random: multinomial noise around 1, seed 004's values inside the spread.
	wr := experiments.Summarize(etas["weighted-random 100/50/25/5"])
	assert.InDelta(t, 0.93, wr.Mean, 0.04)
	assert.Less(t, wr.Min, 0.9+0.03)

	_, err = experiments.WriteReport(dir, registry())
	require.NoError(t, err)
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "| weighted-random | 100/50/25/5 | 50 |")
	assert.Contains(t, string(md), "0.9 (one run)")
	assert.FileExists(t, filepath.Join(dir, "lb-efficiency-eta.png"))
}

func TestWeightSetsFlag(t *testing.T) {
	var s weightSets
	require.NoError(t, s.Set("1/2/3, 4/5"))
	assert.Equal(t, weightSets{{1, 2, 3}, {4, 5}}, s)
	assert.Equal(t, "1/2/3,4/5", s.String())
	assert.ErrorContains(t, s.Set("1/x"), `weight "x"`)
	assert.ErrorContains(t, s.Set("0/0"), "all 2 weights are zero")
	assert.ErrorContains(t, s.Set("1/-2"), `weight "-2"`)
}

func registry(es ...experiments.Experiment) *experiments.Registry {
	r := &experiments.Registry{}
	if len(es) == 0 {
		es = []experiments.Experiment{&Efficiency{}}
	}
	for _, e := range es {
		r.Register(e)
	}
	return r
}

func runBackend(t *testing.T, e experiments.Experiment, dir, backend string, args ...string) *experiments.Table {
	t.Helper()
	tab, _, err := experiments.RunArgs(context.Background(), e, args, experiments.RunOptions{Seed: 1, Backend: backend, Out: dir})
	require.NoError(t, err)
	return tab
}

// lb-live end to end on both backends: every request answered, every
// target measured, the side files written and the report built.
func TestLiveBothBackends(t *testing.T) {
	for _, backend := range []string{"process", "docker"} {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"--duration", "700ms", "--pickers", "weighted-random,prequal",
				"--clients", "4", "--workers", "1:default,0.5:default", "--interval", "200ms"}
			var rs *redistest.Server
			if backend == "docker" {
				// The agent keeps its state in a real Redis, as in the stack.
				rs = redistest.Start(t)
				args = append(args, "--redis", rs.Addr)
			}
			tab := runBackend(t, &Live{}, dir, backend, args...)
			if rs != nil {
				keys, err := rs.Client().Keys(context.Background(), "ringside:lb-live:*").Result()
				require.NoError(t, err)
				assert.NotEmpty(t, keys, "the agent's state is in Redis")
			}
			cells := tab.GroupBy("workload", "target", "clients")
			var names []string
			for _, g := range cells {
				names = append(names, g.Key[0]+"/"+g.Key[1])
				// Every client kept sending through the cell. How many
				// requests that makes is the CPU the workers got (16 in a
				// cell of 700 ms with make test and two busy loops beside
				// it, against more than 20 idle), so the clients are
				// counted, not the requests.
				perClient := map[string]int{}
				for _, i := range g.Rows {
					perClient[tab.Str(i, "client")]++
				}
				clients, err := strconv.Atoi(g.Key[2])
				require.NoError(t, err)
				assert.Len(t, perClient, clients, "%v: every client was answered", g.Key)
				for c, n := range perClient {
					assert.GreaterOrEqual(t, n, 2, "%v: client %s made few requests", g.Key, c)
				}
				assert.Equal(t, len(g.Rows), tab.Count(g.Rows, "status", "200"), "%v had failures", g.Key)
				assert.Equal(t, backend, tab.Str(g.Rows[0], "backend"))
			}
			assert.Equal(t, []string{"cpu/weighted-random", "cpu/prequal", "cpu-throttled/weighted-random", "cpu-throttled/prequal",
				"cpu-throttled/direct", "cpu-throttled/nginx", "proxy/weighted-random", "proxy/direct", "proxy/nginx"}, names)
			// Requests came from both workers, named after their limits.
			workers := map[string]bool{}
			for i := range tab.Rows {
				workers[tab.Str(i, "worker")] = true
			}
			assert.True(t, workers["w1-1cpu"] && workers["w2-0.5cpu"], "workers seen: %v", workers)
			assert.FileExists(t, filepath.Join(dir, SamplesFile))
			assert.FileExists(t, filepath.Join(dir, EventsFile))

			r := &experiments.Registry{}
			r.Register(&Live{})
			_, err := experiments.WriteReport(dir, r)
			require.NoError(t, err)
			md, err := os.ReadFile(filepath.Join(dir, "report.md"))
			require.NoError(t, err)
			assert.Contains(t, string(md), "× nginx's")
			assert.Contains(t, string(md), "added p99 latency over direct")
			assert.Contains(t, string(md), "One worker throttled mid-cell")
			assert.Contains(t, string(md), "prequal, 4 clients: p99")
			assert.FileExists(t, filepath.Join(dir, "lb-live-utilisation.png"))
		})
	}
}

func TestEta(t *testing.T) {
	// Seed 004 §2.4.1's worked example.
	assert.InDelta(t, 54.0/60.0, Eta([]int{5600, 2700, 1400, 300}, []float64{100, 50, 25, 5}), 1e-9)
	assert.Equal(t, 1.0, Eta([]int{10, 5, 0}, []float64{2, 1, 0}))
	assert.True(t, math.IsNaN(Eta([]int{1}, []float64{0})))
}

// lb-sim: the same seed writes the same CSV byte for byte; the report
// states the goal for each heavy cell and compares Prequal with p2c-ewma.
func TestSimDeterministicAndReported(t *testing.T) {
	args := []string{"--n", "4,16", "--util", "0.5,0.9", "--duration", "3s"}
	dir := t.TempDir()
	a := run(t, &Sim{}, dir, 5, 1, args...)
	b := run(t, &Sim{}, t.TempDir(), 5, 1, args...)
	c := run(t, &Sim{}, t.TempDir(), 6, 1, args...)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)
	tab, err := experiments.ReadTable(bytes.NewReader(a))
	require.NoError(t, err)
	require.Len(t, tab.Rows, len(pick.Algorithms)*2*2)

	md, err := experiments.WriteReport(dir, registry(&Sim{}))
	require.NoError(t, err)
	body, err := os.ReadFile(md)
	require.NoError(t, err)
	for _, want := range []string{"n=16, load 0.9:", "Prequal against P2C", "Envoy least_request", "lb-sim-p999-n4.png", "over offered requests"} {
		assert.Contains(t, string(body), want)
	}
	// The tail over offered requests: one row per run, in the main CSV's
	// order, never below the tail over served requests.
	f, err := os.Open(filepath.Join(dir, "lb-sim-offered.csv"))
	require.NoError(t, err)
	defer f.Close()
	off, err := experiments.ReadTable(f)
	require.NoError(t, err)
	require.Len(t, off.Rows, len(tab.Rows))
	for i := range tab.Rows {
		assert.Equal(t, tab.Str(i, "seed")+tab.Str(i, "picker"), off.Str(i, "seed")+off.Str(i, "picker"), "row %d", i)
		assert.GreaterOrEqual(t, off.Float(i, "p999_ms"), tab.Float(i, "p999_ms"), "row %d", i)
		assert.Equal(t, tab.Str(i, "requests"), off.Str(i, "offered"), "row %d", i)
	}
}

// The balancer Pods get lb-live's tuning, not the defaults: its flags,
// parsed as cmd/balancer parses them, give back what lb-live was given.
func TestTuningArgsCarryLiveValues(t *testing.T) {
	var l Live
	fs := experiments.NewFlagSet(&l)
	require.NoError(t, fs.Parse([]string{"--ewma-decay", "3s", "--hot-quantile", "0.5"}))
	var got pick.Tuning
	bfs := flag.NewFlagSet("balancer", flag.ContinueOnError)
	got.Define(bfs, "")
	require.NoError(t, bfs.Parse(l.tuningArgs()))
	assert.Equal(t, l.tuning, got)
	assert.Equal(t, 3*time.Second, got.Decay)
	assert.Equal(t, time.Second, got.Blackout, "lb-live's own default blackout")
	assert.Equal(t, 0.5, got.HotQuantile)
}
