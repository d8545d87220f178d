package main

// Reading `perf script -F comm,pid,tid,cpu,time,event,trace` of the
// sched:sched_switch and sched:sched_waking tracepoints.

import (
	"fmt"
	"regexp"
	"strconv"
)

// event is one tracepoint hit: on cpu at t (seconds on perf's clock), while
// task tid of process pid (command comm) ran.
type event struct {
	comm     string
	pid, tid int
	cpu      int
	t        float64
	// switch: prev left the CPU for next (0 is the idle task).
	isSwitch   bool
	prev, next int
	nextComm   string
	// waking: the running task (or an interrupt taken while it ran, such as
	// a sleeper's timer) made target runnable.
	target     int
	targetComm string
	targetCPU  int // where the target will run
	// exec: the process executed a program (its threads are new since).
	isExec bool
}

var (
	headRE   = regexp.MustCompile(`^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+(\d+\.\d+):\s+sched:(sched_switch|sched_waking|sched_process_exec):\s+(.*)$`)
	switchRE = regexp.MustCompile(`prev_pid=(\d+) .*==> next_comm=(.*) next_pid=(\d+)`)
	wakingRE = regexp.MustCompile(`^comm=(.*) pid=(\d+) .*target_cpu=(\d+)`)
)

// parseLine reads one line; ok is false for lines of other events and for
// anything that is not such a line (perf's headers, a torn last line).
func parseLine(line string) (ev event, ok bool, err error) {
	m := headRE.FindStringSubmatch(line)
	if m == nil {
		return event{}, false, nil
	}
	ev.comm = m[1]
	var nums [3]int
	for i, s := range []string{m[2], m[3], m[4]} {
		if nums[i], err = strconv.Atoi(s); err != nil {
			return event{}, false, fmt.Errorf("%q: %w", line, err)
		}
	}
	ev.pid, ev.tid, ev.cpu = nums[0], nums[1], nums[2]
	if ev.t, err = strconv.ParseFloat(m[5], 64); err != nil {
		return event{}, false, fmt.Errorf("%q: time: %w", line, err)
	}
	rest := m[7]
	if m[6] == "sched_process_exec" {
		ev.isExec = true
		return ev, true, nil
	}
	if m[6] == "sched_switch" {
		s := switchRE.FindStringSubmatch(rest)
		if s == nil {
			return event{}, false, fmt.Errorf("sched_switch without prev_pid and next_pid: %q", line)
		}
		ev.isSwitch, ev.nextComm = true, s[2]
		if ev.prev, err = strconv.Atoi(s[1]); err == nil {
			ev.next, err = strconv.Atoi(s[3])
		}
		if err != nil {
			return event{}, false, fmt.Errorf("%q: %w", line, err)
		}
		return ev, true, nil
	}
	w := wakingRE.FindStringSubmatch(rest)
	if w == nil {
		return event{}, false, fmt.Errorf("sched_waking without comm, pid and target_cpu: %q", line)
	}
	ev.targetComm = w[1]
	if ev.target, err = strconv.Atoi(w[2]); err == nil {
		ev.targetCPU, err = strconv.Atoi(w[3])
	}
	if err != nil {
		return event{}, false, fmt.Errorf("%q: %w", line, err)
	}
	return ev, true, nil
}
