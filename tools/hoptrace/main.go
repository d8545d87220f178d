// Command hoptrace times the hops of a ring election from the execution
// traces of its servers (GET /internal/profile/trace, taken side by side
// over one failover by tools/hop-trace.sh). A hop is a frame forwarded by
// one server and read by the next; the traces split it where the
// processes' own clocks can:
//
//	wake   the sender's write returning → the receiver's runtime making the
//	       reading goroutine runnable (the kernel's delivery, the receiving
//	       thread's wake-up, the runtime's network poll)
//	sched  runnable → running (the receiving process's own scheduler)
//	work   running → the forward's write (read, lock, state machine, metrics)
//	write  the forward's write system call
//	tail   the sender's write returning → its goroutine parking again (what
//	       it still does on its core after the forward)
//
// Every trace carries a clock snapshot (Go ≥ 1.25), which puts all of them
// on the wall clock the servers' status events use, so a round can be
// picked by its announced_ns and won_ns.
//
//	hoptrace [--from NS --to NS] TRACE...
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/exp/trace"
)

// episode is one server's handling of one frame that it forwarded: times
// in wall-clock ns.
type episode struct {
	proc                       string
	woken, ran, w0, w1, parked int64
}

// hop is an episode with the forward that woke it.
type hop struct {
	prev, cur episode
}

func main() {
	from := flag.Int64("from", 0, "only hops woken at or after this wall-clock time (ns since the epoch)")
	to := flag.Int64("to", 0, "only hops woken at or before this wall-clock time (0: no end)")
	flag.Parse()
	if flag.NArg() < 2 {
		fmt.Fprintln(os.Stderr, "usage: hoptrace [--from NS --to NS] TRACE TRACE...")
		os.Exit(2)
	}
	var all []episode
	for _, p := range flag.Args() {
		f, err := os.Open(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "hoptrace:", err)
			os.Exit(1)
		}
		eps, err := episodes(f, p)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "hoptrace: %s: %v\n", p, err)
			os.Exit(1)
		}
		all = append(all, eps...)
	}
	hops := chain(all)
	hops = slices.DeleteFunc(hops, func(h hop) bool { return h.cur.woken < *from || (*to != 0 && h.cur.woken > *to) })
	report(os.Stdout, hops)
}

// episodes reads one server's trace: every goroutine that a ring
// connection's frame woke (it parked on the network in the transport's
// ServeConn) and that then wrote a forward (a write system call under
// the server's sendOne).
func episodes(r io.Reader, name string) ([]episode, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, err
	}
	type gstate struct {
		onNet bool
		ep    *episode
	}
	gs := map[trace.GoID]*gstate{}
	var eps []*episode
	var off int64 // wall-clock ns minus trace ns
	synced := false
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if ev.Kind() == trace.EventSync && !synced {
			if cs := ev.Sync().ClockSnapshot; cs != nil {
				off, synced = cs.Wall.UnixNano()-int64(cs.Trace), true
			}
		}
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		g := gs[st.Resource.Goroutine()]
		if g == nil {
			g = &gstate{}
			gs[st.Resource.Goroutine()] = g
		}
		t := int64(ev.Time())
		was, is := st.Goroutine()
		switch {
		case was == trace.GoRunning && is == trace.GoWaiting:
			if g.ep != nil && g.ep.w1 != 0 && g.ep.parked == 0 {
				g.ep.parked = t
			}
			g.onNet = st.Reason == "network" && calls(ev.Stack(), "transport.(*Transport).ServeConn")
			g.ep = nil
		case was == trace.GoWaiting && is == trace.GoRunnable && g.onNet:
			g.ep, g.onNet = &episode{proc: name, woken: t}, false
		case was == trace.GoRunnable && is == trace.GoRunning && g.ep != nil && g.ep.ran == 0:
			g.ep.ran = t
		case was == trace.GoRunning && is == trace.GoSyscall && g.ep != nil && g.ep.w0 == 0 && calls(ev.Stack(), "server.(*Server).sendOne"):
			g.ep.w0 = t
		case was == trace.GoSyscall && g.ep != nil && g.ep.w0 != 0 && g.ep.w1 == 0:
			g.ep.w1 = t
			eps = append(eps, g.ep)
		}
	}
	if !synced {
		return nil, errors.New("no clock snapshot (a trace of Go 1.25 or later is needed)")
	}
	out := make([]episode, 0, len(eps))
	for _, e := range eps {
		e.woken, e.ran, e.w0, e.w1 = e.woken+off, e.ran+off, e.w0+off, e.w1+off
		if e.parked != 0 {
			e.parked += off
		}
		out = append(out, *e)
	}
	return out, nil
}

func calls(st trace.Stack, fn string) bool {
	for f := range st.Frames() {
		if strings.HasSuffix(f.Func, fn) {
			return true
		}
	}
	return false
}

// maxWake bounds how long after another server's forward a wake-up may
// come and still be taken for that forward's.
const maxWake = 2_000_000

// chain pairs each episode with the forward that woke it: the latest
// write of another server that returned before it, within maxWake.
func chain(eps []episode) []hop {
	slices.SortFunc(eps, func(a, b episode) int { return cmp.Compare(a.woken, b.woken) })
	var hops []hop
	for i, e := range eps {
		best := -1
		for j := range eps {
			p := eps[j]
			if j == i || p.proc == e.proc || p.w1 > e.woken || e.woken-p.w1 > maxWake {
				continue
			}
			if best < 0 || p.w1 > eps[best].w1 {
				best = j
			}
		}
		if best >= 0 {
			hops = append(hops, hop{prev: eps[best], cur: e})
		}
	}
	return hops
}

// report prints every hop and the medians of its parts, in µs.
func report(w io.Writer, hops []hop) {
	parts := []string{"wake", "sched", "work", "write", "tail"}
	cols := make([][]float64, len(parts))
	fmt.Fprintln(w, "woken_ns wake_us sched_us work_us write_us prev_tail_us")
	for _, h := range hops {
		v := []float64{float64(h.cur.woken - h.prev.w1), float64(h.cur.ran - h.cur.woken), float64(h.cur.w0 - h.cur.ran), float64(h.cur.w1 - h.cur.w0), -1}
		if h.prev.parked != 0 {
			v[4] = float64(h.prev.parked - h.prev.w1)
		}
		fmt.Fprintf(w, "%d", h.cur.woken)
		for i, x := range v {
			fmt.Fprintf(w, " %.1f", x/1e3)
			if x >= 0 {
				cols[i] = append(cols[i], x/1e3)
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "hops: %d; medians µs:", len(hops))
	for i, p := range parts {
		fmt.Fprintf(w, " %s %.1f", p, median(cols[i]))
	}
	fmt.Fprintln(w)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}
