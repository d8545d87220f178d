package ringnet

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/ring"
)

func runExp(t *testing.T, e experiments.Experiment, backend string, reps int, args ...string) (*experiments.Table, string) {
	t.Helper()
	return runExpIn(t, t.TempDir(), e, backend, reps, args...)
}

func runExpIn(t *testing.T, dir string, e experiments.Experiment, backend string, reps int, args ...string) (*experiments.Table, string) {
	t.Helper()
	tab, _, err := experiments.RunArgs(context.Background(), e, args, experiments.RunOptions{Seed: 1, Reps: reps, Backend: backend, Out: dir})
	if err != nil {
		showLogs(t, keptLogs(t, dir)) // the run's folder goes with the test
	}
	require.NoError(t, err)
	reg := &experiments.Registry{}
	reg.Register(e)
	path, err := experiments.WriteReport(dir, reg)
	require.NoError(t, err)
	md, err := os.ReadFile(path)
	require.NoError(t, err)
	return tab, string(md)
}

func checkFailover(t *testing.T, dir string, tab *experiments.Table, rows int) {
	t.Helper()
	require.Equal(t, rows, len(tab.Rows))
	wrong := false
	for i := range tab.Rows {
		alg := tab.Str(i, "algorithm")
		wrong = wrong || tab.Str(i, "new_is_max_live") != "true" || tab.Str(i, "coordinators") != "1"
		assert.Equal(t, "true", tab.Str(i, "new_is_max_live"), "row %d %s", i, alg)
		assert.Equal(t, "1", tab.Str(i, "coordinators"), "row %d %s", i, alg)
		assert.Greater(t, tab.Float(i, "detect_ms"), 0.0)
		assert.GreaterOrEqual(t, tab.Float(i, "all_know_ms"), tab.Float(i, "detect_ms"))
		if alg != "bully" { // the largest survivor may elect itself with no message at all
			assert.Greater(t, tab.Float(i, "propagation_ms"), 0.0, "row %d %s", i, alg)
			// One, not two: on a loaded machine a survivor that leaves
			// an ELECTION unacknowledged through its three sends is
			// skipped (ring.Node's unreachable), and of two survivors
			// the largest then wins with its one ELECTION.
			assert.GreaterOrEqual(t, tab.Float(i, "election_msgs"), 1.0, "row %d %s", i, alg)
		}
	}
	// A wrong coordinator's servers' logs are kept (local backend), and
	// shown here: the run's folder goes with the test.
	kept := keptLogs(t, dir)
	if !wrong || tab.Str(0, "backend") != "local" {
		assert.Empty(t, kept, "logs kept with no wrong coordinator")
		return
	}
	assert.NotEmpty(t, kept, "a wrong coordinator's logs")
	showLogs(t, kept)
}

// keptLogs lists the server logs ring-failover kept in dir.
func keptLogs(t *testing.T, dir string) []string {
	t.Helper()
	kept, err := filepath.Glob(filepath.Join(dir, failoverLogs+"-*", "*.log"))
	require.NoError(t, err)
	return kept
}

// showLogs logs the end of each log.
func showLogs(t *testing.T, kept []string) {
	t.Helper()
	for _, l := range kept {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Logf("%s: %v", l, err)
			continue
		}
		lines := strings.Split(string(b), "\n")
		t.Logf("%s, the last of %d lines:\n%s", l, len(lines), strings.Join(lines[max(0, len(lines)-80):], "\n"))
	}
}

func TestFailoverLocal(t *testing.T) {
	start := time.Now().UnixNano()
	dir := t.TempDir()
	tab, md := runExpIn(t, dir, &Failover{}, "local", 3, "--n", "3,5", "--bare-rings", "4")
	checkFailover(t, dir, tab, 6)
	for i := range tab.Rows {
		// Where the ELECTED round lies on the machine's clock.
		at, err := strconv.ParseInt(tab.Str(i, "elected_at_unix_ns"), 10, 64)
		require.NoError(t, err)
		assert.True(t, at > start && at < time.Now().UnixNano(), "row %d: ELECTED sent at %d, not during the run", i, at)
	}
	assert.Contains(t, md, "**0**", "no wrong coordinator")
	// The bare token ring of the same sizes, timed in the same run.
	assert.Contains(t, md, "The physical limit, measured in the same run")
	assert.Regexp(t, `\| 5 \| ([0-9.]+ \| ){10}≤ 2× busy`, md, "busy, at rest and woken, and the servers' own share of a hop")
	// Each mode's trips come from --bare-rings rings of fresh processes,
	// in equal shares.
	f, err := os.Open(filepath.Join(dir, "ring-failover-bare.csv"))
	require.NoError(t, err)
	defer f.Close()
	bare, err := experiments.ReadTable(f)
	require.NoError(t, err)
	trips := map[string]int{}
	for i := range bare.Rows {
		trips[bare.Str(i, "n")+" "+bare.Str(i, "mode")+" ring "+bare.Str(i, "ring")]++
	}
	want := map[string]int{}
	for _, n := range []string{"3", "5"} {
		for ring := range 4 {
			want[fmt.Sprintf("%s busy ring %d", n, ring)] = busyTrips
			want[fmt.Sprintf("%s rest ring %d", n, ring)] = restTrips
			want[fmt.Sprintf("%s woken ring %d", n, ring)] = restTrips
		}
	}
	assert.Equal(t, want, trips)
	assert.Contains(t, md, "pooled over 4 rings of fresh processes")
	assert.Contains(t, md, "timed *busy* (80 trips back to back")
	assert.Contains(t, md, "lowest–highest of the pooled rings: n = 3 ")
}

// Every election over TCP, each on a ring of its own, the bare token ring
// timed once beside them.
func TestFailoverLocalEveryAlgorithm(t *testing.T) {
	dir := t.TempDir()
	tab, md := runExpIn(t, dir, &Failover{}, "local", 1, "--n", "5", "--algorithm", "all")
	checkFailover(t, dir, tab, len(ring.AlgorithmNames()))
	for _, name := range ring.AlgorithmNames() {
		assert.Regexp(t, `\| local \| `+name+` \| 5 \| 1 \|`, md)
		assert.Regexp(t, `\| `+name+` \| 5 \| [0-9.]+ \|`, md, "beside the bare ring")
	}
}

func TestFailoverCompose(t *testing.T) {
	// RINGNODE_ELECTION reaches the containers: a second ring runs Franklin.
	dir := t.TempDir()
	tab, md := runExpIn(t, dir, &Failover{}, "compose", 3, "--n", "4", "--algorithm", "chang-roberts,franklin")
	checkFailover(t, dir, tab, 6)
	assert.Contains(t, md, "| compose | franklin | 4 | 3 |")
	assert.Contains(t, md, "no bare token ring beside this run")
}

// A ring's servers' logs so far are copied out of its scratch folder,
// which goes when the ring closes.
func TestKeepLogsCopiesTheServersLogs(t *testing.T) {
	scratch, out := t.TempDir(), filepath.Join(t.TempDir(), "kept")
	require.NoError(t, os.WriteFile(filepath.Join(scratch, "127.0.0.1_7001.log"), []byte("elected 7001\n"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(scratch, "127.0.0.1_7001"), 0o755)) // a data folder: not a log
	require.NoError(t, (&cleanup{dir: scratch}).keepLogs(out))
	got, err := os.ReadDir(out)
	require.NoError(t, err)
	require.Len(t, got, 1)
	b, err := os.ReadFile(filepath.Join(out, "127.0.0.1_7001.log"))
	require.NoError(t, err)
	assert.Equal(t, "elected 7001\n", string(b))
}

func TestJoinLocal(t *testing.T) {
	tab, md := runExp(t, &Join{}, "local", 2, "--n", "3", "--keys", "300")
	require.Len(t, tab.Rows, 4)
	for i := range tab.Rows {
		assert.Greater(t, tab.Float(i, "keys_moved"), 0.0, "the new server received data")
		assert.GreaterOrEqual(t, tab.Float(i, "rebalanced_ms"), tab.Float(i, "metadata_ms"))
		if tab.Str(i, "load") == "loaded" {
			assert.Greater(t, tab.Float(i, "load_writes"), 0.0)
			assert.Equal(t, "0", tab.Str(i, "load_errors"), "no write fails while a server joins")
		}
	}
	assert.Contains(t, md, "14 ms")
}

func TestKVLoadLocal(t *testing.T) {
	tab, md := runExp(t, &KVLoad{}, "local", 1, "--servers", "1,3", "--clients", "1,4", "--writes", "40", "--fsync", "never,always")
	require.Len(t, tab.Rows, 2*2*2*(1+4)*40)
	var failed []string
	for i := range tab.Rows {
		if tab.Str(i, "ok") != "true" {
			failed = append(failed, tab.Str(i, "key")+": "+tab.Str(i, "error"))
		}
	}
	assert.Empty(t, failed, "every write acknowledged")
	assert.Contains(t, md, "| local | never | 3 | smart | 4 | 160 |")
	assert.Contains(t, md, "| local | always | 3 | smart | 4 | 160 |")
}

func TestLoadedMinusIdleIsASentenceInRingOrder(t *testing.T) {
	means := map[joinKey]float64{
		{"idle", 12}: 10, {"loaded", 12}: 22.5,
		{"idle", 3}: 5, {"loaded", 3}: 4.5,
		{"idle", 5}: 6, {"loaded", 5}: 9,
		{"loaded", 8}: 7, // no idle run of that size: left out
	}
	assert.Equal(t, "3 servers: −0.5 ms, 5 servers: +3 ms and 12 servers: +12.5 ms", loadedMinusIdle(means))
	assert.Equal(t, "", loadedMinusIdle(map[joinKey]float64{{"idle", 3}: 1}))
}

// A short kv-chaos run: faults are injected, the history is checked, and
// the report states the totals beside the goal.
func TestKVChaosLocal(t *testing.T) {
	tab, md := runExp(t, &KVChaos{}, "local", 1, "--duration", "4s", "--fault-every", "700ms")
	require.Len(t, tab.Rows, 1)
	assert.NotEmpty(t, tab.Str(0, "faults"), "the nemesis injected faults")
	assert.Positive(t, tab.Float(0, "acked_writes"))
	assert.Positive(t, tab.Float(0, "reads"))
	assert.Equal(t, "true", tab.Str(0, "linearizable"))
	assert.Equal(t, "0", tab.Str(0, "lost_acked_writes"))
	assert.Contains(t, md, "1 runs: 0 not linearizable")
}

// The servers get every setting the experiment's flags name, as flags
// on the local backend and as environment in containers and Pods.
func TestServerFlagsReachTheServers(t *testing.T) {
	var f serverFlags
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f.define(fs)
	require.NoError(t, fs.Parse([]string{"--ack-timeout", "0s", "--hop-bound", "3ms", "--suspect", "1s", "--timer-slack", "0s", "--spin-read", "2ms", "--monitor-awake=false"}))
	args := strings.Join(f.args(), " ")
	for _, want := range []string{"--ack-timeout 0s", "--hop-bound 3ms", "--suspect 1s", "--timer-slack 0s", "--spin-read 2ms", "--monitor-awake=false"} {
		assert.Contains(t, args, want)
	}
	assert.Subset(t, f.env(), []string{"RINGNODE_ACK_TIMEOUT=0s", "RINGNODE_HOP_BOUND=3ms", "RINGNODE_SUSPECT=1s", "RINGNODE_TIMER_SLACK=0s", "RINGNODE_SPIN_READ=2ms", "RINGNODE_MONITOR_AWAKE=false"})
	require.NoError(t, f.check())

	require.NoError(t, fs.Parse([]string{"--ack-timeout", "-1s"}))
	require.EqualError(t, f.check(), "--ack-timeout -1s: must not be negative")
	require.NoError(t, fs.Parse([]string{"--ack-timeout", "1ms", "--spin-read", "-1ms"}))
	require.EqualError(t, f.check(), "--spin-read -1ms: must not be negative")
	require.NoError(t, fs.Parse([]string{"--spin-read", "6ms"}))
	require.EqualError(t, f.check(), "--spin-read 6ms: at most 5ms")
	require.NoError(t, fs.Parse([]string{"--spin-read", "0s", "--timer-slack", "6ms"}))
	require.EqualError(t, f.check(), "--timer-slack 6ms: want 0 (as inherited) to 5ms")
}

// --bare-rings out of its range is refused by name before any process
// starts.
func TestFailoverRefusesBareRingsOutOfRange(t *testing.T) {
	for _, v := range []string{"0", "-3", "1001"} {
		_, _, err := experiments.RunArgs(context.Background(), &Failover{}, []string{"--n", "3", "--bare-rings", v},
			experiments.RunOptions{Seed: 1, Reps: 1, Backend: "local", Out: t.TempDir()})
		require.EqualError(t, err, "run ring-failover: --bare-rings "+v+": must be 1–1000")
	}
}
