// Command tokenring is one process of a bare token ring: the physical
// limit a ring election on loopback is measured against. Each process
// listens, connects to the next, and forwards every 8-byte token it reads
// at once — no election, no state. The origin (--rounds > 0) injects one
// token, times its trips around the ring and prints each round trip in
// nanoseconds on its own line, then closes the ring. With --gap each trip
// waits that long after the last one came back: the ring at rest rather
// than kept busy. With --warm K each timed trip follows K untimed ones
// sent right after the gap: K = 1 meets the ring as a ring election's
// ELECTED round does, every process woken one trip earlier (by the
// ELECTION) after the ring had rested.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/ringside/ringside/internal/serve"
	"github.com/ringside/ringside/internal/timerslack"
)

func main() { serve.Main("tokenring", run) }

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tokenring", flag.ContinueOnError)
	listen := fs.String("listen", "", "this process's address")
	listenFD := fs.Int("listen-fd", 0, "listen on this inherited file descriptor (a listening socket) instead of --listen")
	next := fs.String("next", "", "the next process's address")
	rounds := fs.Int("rounds", 0, "origin only: timed trips around the ring (after 10 warm-up trips)")
	gap := fs.Duration("gap", 0, "origin only: the pause before each trip")
	warm := fs.Int("warm", 0, "origin only: untimed trips between each pause and its timed trip")
	slack := fs.Duration("timer-slack", 0, "how late the kernel may end this process's timed sleeps, as ringnode --timer-slack (0: as inherited)")
	monitorAwake := fs.Bool("monitor-awake", false, "keep the Go runtime's monitor out of its deep sleep, as ringnode --monitor-awake")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*listen == "") == (*listenFD == 0) || *listenFD < 0 || *next == "" || *rounds < 0 || *gap < 0 || *warm < 0 {
		return errors.New("want --listen ADDR or --listen-fd N ≥ 3, --next ADDR [--rounds N ≥ 0] [--gap D ≥ 0] [--warm K ≥ 0] [--timer-slack D] [--monitor-awake]")
	}
	// Before the inherited listener is taken over: executing the program
	// again keeps descriptor 3 only while it is the one the parent passed.
	env := os.Environ()
	if *monitorAwake {
		env = timerslack.WithMonitorAwake(env)
	}
	if err := timerslack.Apply(*slack, env); err != nil {
		return fmt.Errorf("--timer-slack: %w", err)
	}
	ln, err := listener(*listen, *listenFD)
	if err != nil {
		return err
	}
	defer ln.Close()
	// Dial first: a listener's backlog accepts before Accept is called,
	// so every process can dial its successor before any accepts.
	out, err := dial(ctx, *next)
	if err != nil {
		return err
	}
	defer out.Close()
	in, err := ln.Accept()
	if err != nil {
		return err
	}
	defer in.Close()
	if *rounds == 0 {
		_, err := io.Copy(out, in) // relay until the origin closes the ring
		return err
	}
	return originate(in, out, os.Stdout, *rounds, *gap, *warm)
}

// listener listens on addr, or takes over the listening socket fd that
// the parent handed down.
func listener(addr string, fd int) (net.Listener, error) {
	if fd == 0 {
		return net.Listen("tcp", addr)
	}
	f := os.NewFile(uintptr(fd), "listener")
	if f == nil {
		return nil, fmt.Errorf("--listen-fd %d: not an open file descriptor", fd)
	}
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("--listen-fd %d: %w", fd, err)
	}
	return ln, nil
}

func dial(ctx context.Context, addr string) (net.Conn, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("next %s: %w", addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// originate sends the token round rounds+10 times and writes each timed
// trip's nanoseconds to results, one a line (the first 10 warm the ring).
func originate(in io.Reader, out, results io.Writer, rounds int, gap time.Duration, warm int) error {
	var tok [8]byte
	trip := func(i int) error {
		if _, err := out.Write(tok[:]); err != nil {
			return err
		}
		if _, err := io.ReadFull(in, tok[:]); err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		return nil
	}
	for i := range rounds + 10 {
		time.Sleep(gap)
		for range warm {
			if err := trip(i); err != nil {
				return err
			}
		}
		start := time.Now()
		if err := trip(i); err != nil {
			return err
		}
		if i >= 10 {
			if _, err := fmt.Fprintln(results, time.Since(start).Nanoseconds()); err != nil {
				return err
			}
		}
	}
	return nil
}
