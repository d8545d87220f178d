package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two rounds of 1 ms on two CPUs, 2 hops each, on a clock whose
// monotonic time is Unix time − 1000 s: CPU 0 runs ringnode 100's thread
// 101 (its second task: the runtime monitor) for 0.5 ms of the first and
// CPU 1 thread 202 of ringnode 200 for all of both; the rest is idle.
func TestRunSumsTheRounds(t *testing.T) {
	csv := filepath.Join(t.TempDir(), "ring-failover.csv")
	require.NoError(t, os.WriteFile(csv, []byte("n,elected_round_ms,elected_at_unix_ns\n"+
		"3,1,1001000000000\n"+
		"3,1,1002000000000\n"+
		"3,0,0\n"), 0o644)) // not measured: left out
	trace := strings.Join([]string{
		"perf 1/1 [000] 0.5: sched:sched_switch: prev_comm=perf prev_pid=1 prev_prio=120 prev_state=S ==> next_comm=ringnode next_pid=101 next_prio=120",
		"perf 1/1 [001] 0.5: sched:sched_switch: prev_comm=perf prev_pid=1 prev_prio=120 prev_state=S ==> next_comm=ringnode next_pid=202 next_prio=120",
		"ringnode 100/101 [000] 1.0005: sched:sched_waking: comm=ringnode pid=202 prio=120 target_cpu=001",
		"ringnode 100/101 [000] 1.0005: sched:sched_switch: prev_comm=ringnode prev_pid=101 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120",
		"ringnode 200/202 [001] 1.0007: sched:sched_waking: comm=ringnode pid=201 prio=120 target_cpu=001",
		"ringnode 200/201 [001] 1.5: sched:sched_waking: comm=ringnode pid=202 prio=120 target_cpu=001", // between the rounds
		"ringnode 200/202 [001] 3.0: sched:sched_switch: prev_comm=ringnode prev_pid=202 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120",
		"swapper 0/0 [000] 3.0: sched:sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=perf next_pid=1 next_prio=120",
	}, "\n")
	var out strings.Builder
	require.NoError(t, run([]string{"--offset", "1000000000000", "--csv", csv}, strings.NewReader(trace), &out))
	assert.Contains(t, out.String(), "2 ELECTED rounds, 1000 µs each on average, 500.0 µs per hop")
	assert.Contains(t, out.String(), " 50.0 %  ringnode: every other thread")
	assert.Contains(t, out.String(), " 37.5 %  idle")
	assert.Contains(t, out.String(), " 12.5 %  ringnode: its Go runtime's monitor (sysmon)")
	assert.Contains(t, out.String(), "0.25  ringnode → another ringnode process")
	assert.Contains(t, out.String(), "0.25  ringnode → its own monitor") // 202 wakes 201, the second task of 200
	assert.NotContains(t, out.String(), "0.50", "the wake-up between the rounds is not counted")
}

// --windows lists the rounds for perf script --time, with their hops.
func TestRunListsTheRounds(t *testing.T) {
	csv := filepath.Join(t.TempDir(), "ring-failover.csv")
	require.NoError(t, os.WriteFile(csv, []byte("n,elected_round_ms,elected_at_unix_ns\n"+
		"3,1,1001000000000\n"+
		"3,0,0\n"+ // not measured: left out
		"16,2.5,1002000000000\n"), 0o644))
	var out strings.Builder
	require.NoError(t, run([]string{"--offset", "1000000000000", "--csv", csv, "--windows"}, strings.NewReader(""), &out))
	assert.Equal(t, "1.000000,1.001000 2\n2.000000,2.002500 15\n", out.String())
}

func TestRunRefusesWhatItCannotPlace(t *testing.T) {
	dir := t.TempDir()
	noCol := filepath.Join(dir, "old.csv")
	require.NoError(t, os.WriteFile(noCol, []byte("n,elected_round_ms\n3,1\n"), 0o644))
	noRounds := filepath.Join(dir, "sim.csv")
	require.NoError(t, os.WriteFile(noRounds, []byte("n,elected_round_ms,elected_at_unix_ns\n3,1,0\n"), 0o644))
	garbage := filepath.Join(dir, "garbage.csv")
	require.NoError(t, os.WriteFile(garbage, []byte("n,elected_round_ms,elected_at_unix_ns\n3,1,12x\n"), 0o644))
	ok := filepath.Join(dir, "ok.csv")
	require.NoError(t, os.WriteFile(ok, []byte("n,elected_round_ms,elected_at_unix_ns\n3,1,1001000000000\n"), 0o644))
	for _, c := range []struct {
		args  []string
		trace string
		want  string
	}{
		{[]string{"--csv", ok}, "", "--offset"},
		{[]string{"--offset", "5"}, "", "--csv"},
		{[]string{"--offset", "5", "--csv", filepath.Join(dir, "missing.csv")}, "", "missing.csv"},
		{[]string{"--offset", "5", "--csv", noCol}, "", "elected_at_unix_ns"},
		{[]string{"--offset", "5", "--csv", noRounds}, "", "no ELECTED round"},
		{[]string{"--offset", "5", "--csv", garbage}, "", "12x"},
		{[]string{"--offset", "5", "--csv", ok}, "# only a header\n", "no sched_switch"},
		{[]string{"--offset", "5", "--csv", ok}, "ringnode 1/2 [000] 3.5: sched:sched_switch: prev_state=S\n", "sched_switch without"},
	} {
		err := run(c.args, strings.NewReader(c.trace), &strings.Builder{})
		require.Error(t, err, c.args)
		assert.Contains(t, err.Error(), c.want, c.args)
	}
}

// A Go program's monitor is the first thread its program started: after
// an exec (timerslack executes ringnode twice) the threads of the first
// image are gone, and the monitor is the first of the new ones.
func TestTheMonitorIsTheFirstThreadOfTheLastExec(t *testing.T) {
	s := newSums([]window{{from: 10, to: 11, hops: 1}}, "ringnode")
	for _, line := range []string{
		"ringnode 100/101 [000] 1.0: sched:sched_waking: comm=ringnode pid=100 prio=120 target_cpu=000", // 101: the first image's monitor
		"ringnode 100/100 [000] 2.0: sched:sched_process_exec: filename=/bin/ringnode pid=100 old_pid=100",
		"ringnode 100/107 [000] 3.0: sched:sched_waking: comm=ringnode pid=100 prio=120 target_cpu=000",
		"ringnode 100/104 [001] 3.5: sched:sched_waking: comm=ringnode pid=100 prio=120 target_cpu=000",
		"ringnode 200/203 [001] 4.0: sched:sched_waking: comm=ringnode pid=200 prio=120 target_cpu=000", // never executed while traced
		"ringnode 200/202 [001] 4.5: sched:sched_waking: comm=ringnode pid=200 prio=120 target_cpu=000",
	} {
		ev, ok, err := parseLine(line)
		require.NoError(t, err)
		require.True(t, ok, line)
		s.add(ev)
	}
	s.findMonitors()
	assert.Equal(t, map[int]bool{104: true, 202: true}, s.monitors)
}

// A woken task's wait for a CPU, split by whether the CPU it was woken
// onto was idle: 202 waits 30 µs for idle CPU 1, 301 waits 100 µs behind
// 101 on CPU 0; a wake-up outside the rounds is not timed.
func TestWakeToRunDelays(t *testing.T) {
	s := newSums([]window{{from: 1, to: 2, hops: 2}}, "ringnode")
	for _, line := range []string{
		"perf 1/1 [000] 0.5: sched:sched_switch: prev_comm=perf prev_pid=1 prev_prio=120 prev_state=S ==> next_comm=ringnode next_pid=101 next_prio=120",
		"perf 1/1 [001] 0.5: sched:sched_switch: prev_comm=perf prev_pid=1 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120",
		"ringnode 100/101 [000] 0.6: sched:sched_waking: comm=ringnode pid=202 prio=120 target_cpu=001", // before the rounds
		"ringnode 100/101 [000] 1.000100: sched:sched_waking: comm=ringnode pid=202 prio=120 target_cpu=001",
		"swapper 0/0 [001] 1.000130: sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=ringnode next_pid=202 next_prio=120",
		"ringnode 200/202 [001] 1.000200: sched:sched_waking: comm=ringnode pid=301 prio=120 target_cpu=000",
		"ringnode 100/101 [000] 1.000300: sched:sched_switch: prev_comm=ringnode prev_pid=101 prev_prio=120 prev_state=S ==> next_comm=ringnode next_pid=301 next_prio=120",
		"ringnode 300/301 [000] 1.000400: sched:sched_switch: prev_comm=ringnode prev_pid=301 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120",
	} {
		ev, ok, err := parseLine(line)
		require.NoError(t, err)
		require.True(t, ok, line)
		s.add(ev)
	}
	var out strings.Builder
	s.reportDelays(&out)
	assert.Contains(t, out.String(), "idle CPU, ringnode → another ringnode process: 1, 30.0, 30.0")
	assert.Contains(t, out.String(), "busy CPU, ringnode → another ringnode process: 1, 100.0, 100.0")
	assert.Len(t, s.delays, 2, "the wake-up before the rounds is not timed")
}
