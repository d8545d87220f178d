package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// sums adds up, inside the windows, each task's time on a CPU and the
// wake-ups, and names them once the whole trace has said which task
// belongs to which process.
type sums struct {
	wins []window
	comm string

	cpus    int
	running map[int]float64 // CPU → when its task began to run
	commOf  map[int]string  // tid → command
	pidOf   map[int]int     // tid → process
	onCPU   map[int]float64 // tid → seconds inside windows
	wakes   map[[2]int]int  // waker tid, target tid → count
	current map[int]int     // CPU → the task on it (0: idle)
	woken   map[int]waking  // tid → its wake-up inside a window, until it runs
	delays  []delay         // wake-up → on a CPU, of the wake-ups inside windows

	firstSeen map[int]float64 // tid → its first event
	execAt    map[int]float64 // process → its last exec
	monitors  map[int]bool    // tids of Go runtime monitors, once the trace is read
}

// waking is a wake-up waiting for its task to run.
type waking struct {
	t       float64
	waker   int
	idleCPU bool // the CPU it was woken onto ran nothing at the time
}

// delay is how long a woken task waited for a CPU.
type delay struct {
	waker, target int
	idleCPU       bool
	d             float64
}

func newSums(wins []window, comm string) *sums {
	return &sums{wins: wins, comm: comm, running: map[int]float64{}, current: map[int]int{}, woken: map[int]waking{},
		commOf: map[int]string{}, pidOf: map[int]int{}, onCPU: map[int]float64{}, wakes: map[[2]int]int{},
		firstSeen: map[int]float64{}, execAt: map[int]float64{}}
}

func (s *sums) add(ev event) {
	s.cpus = max(s.cpus, ev.cpu+1)
	if ev.tid != 0 {
		s.commOf[ev.tid], s.pidOf[ev.tid] = ev.comm, ev.pid
		s.seen(ev.tid, ev.t)
	}
	if ev.isExec {
		s.execAt[ev.pid] = ev.t // perf names it after the new program already
		return
	}
	if !ev.isSwitch {
		if s.inside(ev.t) {
			s.wakes[[2]int{ev.tid, ev.target}]++
			cur, known := s.current[ev.targetCPU]
			s.woken[ev.target] = waking{t: ev.t, waker: ev.tid, idleCPU: known && cur == 0}
		}
		if _, known := s.commOf[ev.target]; !known {
			s.commOf[ev.target] = ev.targetComm
		}
		s.seen(ev.target, ev.t)
		return
	}
	if since, ok := s.running[ev.cpu]; ok {
		s.onCPU[ev.prev] += s.overlap(since, ev.t)
	}
	s.running[ev.cpu] = ev.t
	s.current[ev.cpu] = ev.next
	if w, ok := s.woken[ev.next]; ok {
		s.delays = append(s.delays, delay{waker: w.waker, target: ev.next, idleCPU: w.idleCPU, d: ev.t - w.t})
		delete(s.woken, ev.next)
	}
	if _, known := s.commOf[ev.next]; !known && ev.next != 0 {
		s.commOf[ev.next] = ev.nextComm
	}
}

func (s *sums) inside(t float64) bool {
	return slices.ContainsFunc(s.wins, func(w window) bool { return t >= w.from && t < w.to })
}

func (s *sums) overlap(from, to float64) float64 {
	var d float64
	for _, w := range s.wins {
		if a, b := max(from, w.from), min(to, w.to); b > a {
			d += b - a
		}
	}
	return d
}

func (s *sums) seen(tid int, t float64) {
	if _, ok := s.firstSeen[tid]; !ok {
		s.firstSeen[tid] = t
	}
}

// findMonitors names each process's runtime monitor (sysmon), for a Go
// program: runtime.main starts it before any other thread, so it is the
// lowest-numbered thread, the main thread aside, of those the process's
// program started since its last exec (timerslack executes it twice).
func (s *sums) findMonitors() {
	first := map[int]int{} // process → its monitor
	for tid, pid := range s.pidOf {
		if tid == pid || s.firstSeen[tid] < s.execAt[pid] {
			continue
		}
		if m, ok := first[pid]; !ok || tid < m {
			first[pid] = tid
		}
	}
	s.monitors = map[int]bool{}
	for _, tid := range first {
		s.monitors[tid] = true
	}
}

func (s *sums) monitor(tid int) bool { return s.monitors[tid] }

func (s *sums) cpuKind(tid int) string {
	switch c := s.commOf[tid]; {
	case tid == 0:
		return "idle"
	case c == s.comm && s.monitor(tid):
		return c + ": its Go runtime's monitor (sysmon)"
	case c == s.comm:
		return c + ": every other thread"
	default:
		name, _, _ := strings.Cut(c, "/") // kworker/u8:2 → kworker
		return name
	}
}

func (s *sums) wakeKind(waker, target int) string {
	from, to := s.commOf[waker], s.commOf[target]
	pw := s.pidOf[waker]
	pt, known := s.pidOf[target]
	switch {
	case waker == 0:
		return "an interrupt on an idle CPU → " + cmp.Or(to, "?")
	case from != s.comm:
		return cmp.Or(from, "?") + " → " + cmp.Or(to, "?")
	case to != s.comm:
		return s.comm + " → " + cmp.Or(to, "?")
	case !known:
		return s.comm + " → a thread that never ran"
	case pt == pw && s.monitor(target):
		return s.comm + " → its own monitor (a system call after idling wakes it)"
	case pt == pw:
		return s.comm + " → another thread of its own process"
	case s.monitor(target):
		return s.comm + " → another process's monitor (its sleep's timer, taken on this CPU)"
	default:
		return s.comm + " → another " + s.comm + " process"
	}
}

func (s *sums) report(out io.Writer) error {
	var span float64
	hops := 0
	for _, w := range s.wins {
		span += w.to - w.from
		hops += w.hops
	}
	if s.cpus == 0 {
		return fmt.Errorf("the trace holds no sched_switch or sched_waking event")
	}
	s.findMonitors()
	fmt.Fprintf(out, "%d ELECTED rounds, %.0f µs each on average, %.1f µs per hop\n", len(s.wins), span/float64(len(s.wins))*1e6, span/float64(hops)*1e6)
	cpu := map[string]float64{}
	for tid, d := range s.onCPU {
		cpu[s.cpuKind(tid)] += d
	}
	fmt.Fprintf(out, "\nwhat the %d CPUs did in them (share of their time):\n", s.cpus)
	for _, k := range byValue(cpu) {
		if cpu[k] < span*float64(s.cpus)/2000 {
			break // under 0.05 %
		}
		fmt.Fprintf(out, "  %5.1f %%  %s\n", cpu[k]/span/float64(s.cpus)*100, k)
	}
	wk := map[string]float64{}
	for p, c := range s.wakes {
		wk[s.wakeKind(p[0], p[1])] += float64(c)
	}
	fmt.Fprintln(out, "\nwake-ups in them, per hop:")
	for _, k := range byValue(wk) {
		if wk[k] < float64(hops)/200 {
			break // under 0.005 a hop
		}
		fmt.Fprintf(out, "  %5.2f  %s\n", wk[k]/float64(hops), k)
	}
	s.reportDelays(out)
	return nil
}

// reportDelays says how long the woken tasks waited for a CPU (sched_waking
// → the sched_switch onto it), by kind of wake-up and by whether the CPU
// chosen was idle (its wait is then its way out of the idle state) or busy
// (a turn behind what ran there).
func (s *sums) reportDelays(out io.Writer) {
	by := map[string][]float64{} // "idle CPU, kind" or "busy CPU, kind" → µs
	for _, d := range s.delays {
		state := "busy"
		if d.idleCPU {
			state = "idle"
		}
		k := state + " CPU, " + s.wakeKind(d.waker, d.target)
		by[k] = append(by[k], d.d*1e6)
	}
	keys := slices.SortedFunc(maps.Keys(by), func(a, b string) int { return cmp.Or(cmp.Compare(len(by[b]), len(by[a])), strings.Compare(a, b)) })
	fmt.Fprintln(out, "\nwoken → on a CPU, µs (count, p50, p90), by the state of the CPU it was woken onto:")
	for _, k := range keys {
		ds := by[k]
		slices.Sort(ds)
		fmt.Fprintf(out, "  %s: %d, %.1f, %.1f\n", k, len(ds), ds[len(ds)/2], ds[len(ds)*9/10])
	}
}

// byValue lists m's keys, largest value first.
func byValue(m map[string]float64) []string {
	return slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b)) })
}
