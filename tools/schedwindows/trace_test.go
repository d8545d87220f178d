package main

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Lines as perf 6.1 prints them on this machine.
func TestParseLine(t *testing.T) {
	ev, ok, err := parseLine(" kworker/u8:2-wr 22127/22127 [000]  2140.912857: sched:sched_waking: comm=ringnode pid=9937 prio=120 target_cpu=000")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, event{comm: "kworker/u8:2-wr", pid: 22127, tid: 22127, cpu: 0, t: 2140.912857, target: 9937, targetComm: "ringnode"}, ev)

	ev, ok, err = parseLine("        ringnode  9880/9881  [001]  2140.912601: sched:sched_switch: prev_comm=ringnode prev_pid=9881 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, event{comm: "ringnode", pid: 9880, tid: 9881, cpu: 1, t: 2140.912601, isSwitch: true, prev: 9881, next: 0, nextComm: "swapper/1"}, ev)

	ev, ok, err = parseLine("        ringnode  9880/9880  [000]  2140.5: sched:sched_process_exec: filename=/work/bin/ringnode pid=9880 old_pid=9880")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, event{comm: "ringnode", pid: 9880, tid: 9880, t: 2140.5, isExec: true}, ev)

	for _, line := range []string{"", "# ========", "perf 1/1 [000] 1.0: cpu-clock:", "ringnode 1/2 [000] 3.5: sched:sched_wakeup_new: comm=x pid=3 prio=120"} {
		_, ok, err := parseLine(line)
		assert.NoError(t, err, line)
		assert.False(t, ok, line)
	}
	// A tracepoint line it should read but cannot is an error naming it,
	// never a silently wrong sum.
	for _, line := range []string{
		"ringnode 1/2 [000] 3.5: sched:sched_switch: prev_comm=x prev_state=S",
		"ringnode 1/2 [000] 3.5: sched:sched_waking: target_cpu=000",
		"ringnode 1/99999999999999999999 [000] 3.5: sched:sched_waking: comm=x pid=3 prio=120",
		"ringnode 1/2 [000] 3.5: sched:sched_switch: prev_comm=x prev_pid=99999999999999999999 prev_prio=120 prev_state=S ==> next_comm=y next_pid=4 next_prio=120",
	} {
		_, _, err := parseLine(line)
		assert.Error(t, err, line)
	}
}

// format writes ev back as perf script prints it.
func (ev event) format() string {
	head := fmt.Sprintf("%16s %5d/%-5d [%03d] %.6f: ", ev.comm, ev.pid, ev.tid, ev.cpu, ev.t)
	if ev.isExec {
		return head + fmt.Sprintf("sched:sched_process_exec: filename=/bin/%s pid=%d old_pid=%d", ev.comm, ev.pid, ev.tid)
	}
	if ev.isSwitch {
		return head + fmt.Sprintf("sched:sched_switch: prev_comm=%s prev_pid=%d prev_prio=120 prev_state=S ==> next_comm=%s next_pid=%d next_prio=120",
			ev.comm, ev.prev, ev.nextComm, ev.next)
	}
	return head + fmt.Sprintf("sched:sched_waking: comm=%s pid=%d prio=120 target_cpu=%03d", ev.targetComm, ev.target, ev.cpu)
}

// Whatever a line says, what was read from it is read back the same once
// written out as perf writes it: the numbers that place and name a task
// survive, the time to perf's microsecond.
func FuzzParseLine(f *testing.F) {
	f.Add(" kworker/u8:2-wr 22127/22127 [000]  2140.912857: sched:sched_waking: comm=ringnode pid=9937 prio=120 target_cpu=000")
	f.Add("        ringnode  9880/9881  [001]  2140.912601: sched:sched_switch: prev_comm=ringnode prev_pid=9881 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120")
	f.Add("a b 1/2 [3] 4.5: sched:sched_switch: prev_pid=1 x ==> next_comm=a ==> next_comm=b next_pid=2")
	f.Add("ringnode 9880/9880 [000] 2140.5: sched:sched_process_exec: filename=/work/bin/ringnode pid=9880 old_pid=9880")
	f.Fuzz(func(t *testing.T, line string) {
		ev, ok, err := parseLine(line)
		if err != nil || !ok {
			assert.False(t, ok && err != nil)
			return
		}
		again, ok, err := parseLine(ev.format())
		require.NoError(t, err, ev.format())
		require.True(t, ok, ev.format())
		assert.Equal(t, [8]int{ev.pid, ev.tid, ev.cpu, ev.prev, ev.next, ev.target, boolInt(ev.isSwitch), boolInt(ev.isExec)},
			[8]int{again.pid, again.tid, again.cpu, again.prev, again.next, again.target, boolInt(again.isSwitch), boolInt(again.isExec)}, ev.format())
		if !math.IsInf(ev.t, 0) {
			assert.InDelta(t, ev.t, again.t, 1e-6*math.Max(1, ev.t/1e9))
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
