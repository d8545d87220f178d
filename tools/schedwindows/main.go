// Command schedwindows says what a machine's CPUs did while ringnode's
// ELECTED rounds went around: from a system-wide trace of the scheduler
// (perf's sched_switch, sched_waking and sched_process_exec) and ring-failover's CSV, whose
// elected_at_unix_ns and elected_round_ms place each round, it sums the
// CPU time of every command (and of ringnode's runtime monitor apart) and
// counts the wake-ups inside the rounds. tools/sched-profile.sh runs it.
//
//	schedwindows offset                     # CLOCK_REALTIME − CLOCK_MONOTONIC, ns
//	perf script -F comm,pid,tid,cpu,time,event,trace -i perf.data |
//	  schedwindows --offset NS --csv ring-failover.csv
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringside/ringside/experiments"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "schedwindows:", err)
		os.Exit(1)
	}
}

func run(args []string, in io.Reader, out io.Writer) error {
	if len(args) == 1 && args[0] == "offset" {
		var mono unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono); err != nil {
			return err
		}
		_, err := fmt.Fprintln(out, time.Now().UnixNano()-mono.Nano())
		return err
	}
	fs := flag.NewFlagSet("schedwindows", flag.ContinueOnError)
	offset := fs.Int64("offset", 0, "CLOCK_REALTIME − CLOCK_MONOTONIC in ns when perf recorded (schedwindows offset), perf recording with -k CLOCK_MONOTONIC")
	csvPath := fs.String("csv", "", "ring-failover's CSV of the traced run")
	comm := fs.String("comm", "ringnode", "the command whose rounds these are")
	list := fs.Bool("windows", false, "print each round as \"FROM,TO HOPS\" on perf's clock (perf script --time FROM,TO) instead of summing a trace")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *offset <= 0 || *csvPath == "" || fs.NArg() > 0 {
		return errors.New("want offset, or --offset NS --csv FILE [--comm NAME | --windows] with perf script's output on stdin")
	}
	wins, err := windows(*csvPath, *offset)
	if err != nil {
		return err
	}
	if *list {
		for _, w := range wins {
			if _, err := fmt.Fprintf(out, "%.6f,%.6f %d\n", w.from, w.to, w.hops); err != nil {
				return err
			}
		}
		return nil
	}
	s := newSums(wins, *comm)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		ev, ok, err := parseLine(sc.Text())
		if err != nil {
			return err
		}
		if ok {
			s.add(ev)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the trace: %w", err)
	}
	return s.report(out)
}

// window is one ELECTED round on perf's clock (seconds), of hops hops.
type window struct {
	from, to float64
	hops     int
}

func windows(path string, offset int64) ([]window, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tab, err := experiments.ReadTable(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var wins []window
	for i := range tab.Rows {
		at, err := strconv.ParseInt(tab.Str(i, "elected_at_unix_ns"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s row %d: elected_at_unix_ns: %w", path, i+1, err)
		}
		round, n := tab.Float(i, "elected_round_ms"), int(tab.Float(i, "n"))
		if err := tab.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if at <= 0 || round <= 0 || n < 3 {
			continue // not measured (virtual time, a lone survivor)
		}
		from := float64(at-offset) / 1e9
		wins = append(wins, window{from: from, to: from + round/1e3, hops: n - 1})
	}
	if len(wins) == 0 {
		return nil, fmt.Errorf("%s: no ELECTED round with elected_at_unix_ns", path)
	}
	return wins, nil
}
