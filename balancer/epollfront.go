package balancer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// EpollFront serves the balancer the way nginx does: one event loop per
// core, each on its own locked thread, with both sides of every request on
// the loop — the client's connection and the worker's — so a request costs
// its four system calls and a share of one epoll_wait, and no goroutine is
// parked or woken for it. The fasthttp front spends the Go runtime's share
// of that (a goroutine per connection, reads that park) on top;
// docs/balancer-front.md has the measurements.
//
// Each message is framed as its bytes arrive (framer), then parsed once,
// whole, with fasthttp's readers, so the fasthttp front's checks and header
// rewrites apply unchanged; like it, the loop buffers bodies whole: a
// request head over HeadBytes gets 431, a body over MaxBodyBytes 413, a
// worker's answer over it 502. Memory per client is bounded by those.
type EpollFront struct {
	B *Balancer
	// Addr is where ListenAndServe listens: one SO_REUSEPORT socket per
	// loop, so the kernel spreads the connections.
	Addr string
	// IdleTimeout closes a client connection that sends no request for
	// that long; HeaderTimeout bounds reading one request.
	IdleTimeout, HeaderTimeout time.Duration
	// HeadBytes bounds a request's head (default 64 KiB); MaxBodyBytes a
	// request's or an answer's body (default 8 MiB).
	HeadBytes, MaxBodyBytes int
	// Loops is the number of event loops (default GOMAXPROCS).
	Loops int

	mu       sync.Mutex
	loops    []*eloop
	lns      []net.Listener
	done     chan struct{}
	shutdown atomic.Bool
	clients  atomic.Int64 // client connections open, at most accept.MaxConns
	open     sync.Map     // worker address → *atomic.Int64: connections open to it
}

// Timeouts of the loop's own: a worker that neither takes a request nor
// answers it, a client that takes no bytes of its answer.
const (
	upstreamTimeout = 30 * time.Second
	writeTimeout    = 30 * time.Second
)

// ListenAndServe listens on f.Addr and serves until Shutdown.
func (f *EpollFront) ListenAndServe() error {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
		return cmp.Or(err, serr)
	}}
	addr := f.Addr
	var lns []net.Listener
	for range f.loopCount() {
		ln, err := lc.Listen(context.Background(), "tcp", addr)
		if err != nil {
			for _, ln := range lns {
				ln.Close()
			}
			return err
		}
		// The others bind where the first did, also when Addr asked for
		// any port.
		addr = ln.Addr().String()
		lns = append(lns, ln)
	}
	return f.serve(lns)
}

// Serve serves the connections of ln (a TCP or a Unix listener), which
// every loop accepts from, until Shutdown.
func (f *EpollFront) Serve(ln net.Listener) error { return f.serve([]net.Listener{ln}) }

func (f *EpollFront) loopCount() int { return cmp.Or(f.Loops, runtime.GOMAXPROCS(0)) }

func (f *EpollFront) serve(lns []net.Listener) error {
	f.mu.Lock()
	if f.shutdown.Load() || f.done != nil {
		f.mu.Unlock()
		for _, ln := range lns {
			ln.Close()
		}
		return http.ErrServerClosed
	}
	var loops []*eloop
	for i := range f.loopCount() {
		l, err := newLoop(f, lns[i%len(lns)])
		if err != nil {
			f.mu.Unlock()
			for _, l := range loops {
				l.release()
			}
			return err
		}
		loops = append(loops, l)
	}
	f.loops, f.lns, f.done = loops, lns, make(chan struct{})
	f.mu.Unlock()
	defer reserveProcs(len(loops), f.B.log)()

	errc := make(chan error, len(loops))
	for _, l := range loops {
		go func() { errc <- l.run() }()
	}
	var first error
	for range loops {
		if err := <-errc; err != nil && first == nil {
			// A loop that fails takes the others down: a front serving
			// on fewer loops than it says would be a quiet degradation.
			first = err
			f.stop(true)
		}
	}
	f.mu.Lock()
	f.loops = nil
	f.mu.Unlock()
	for _, l := range loops {
		l.release()
	}
	close(f.done)
	if first == nil && f.shutdown.Load() {
		return http.ErrServerClosed
	}
	return first
}

// Shutdown stops accepting, closes idle client connections, lets the busy
// ones finish their request, and waits for them until ctx ends; then it
// closes them all.
func (f *EpollFront) Shutdown(ctx context.Context) error {
	f.shutdown.Store(true)
	f.mu.Lock()
	done, lns := f.done, f.lns
	f.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	if done == nil {
		return nil
	}
	f.stop(false)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		f.stop(true)
		<-done
		return ctx.Err()
	}
}

// stop wakes every loop to drain (or, forced, to close everything).
func (f *EpollFront) stop(force bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.loops {
		if force {
			l.force.Store(true)
		}
		l.wake()
	}
	f.shutdown.Store(true)
}

// opened counts a connection to the worker at addr (−1: one closed).
func (f *EpollFront) opened(addr string, n int64) {
	c, ok := f.open.Load(addr)
	if !ok {
		c, _ = f.open.LoadOrStore(addr, new(atomic.Int64))
	}
	c.(*atomic.Int64).Add(n)
}

// Connections reports how many connections the front holds open to the
// worker at addr.
func (f *EpollFront) Connections(addr string) int64 {
	if c, ok := f.open.Load(addr); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}

// listenerFD is a duplicate of ln's socket for a loop of its own: closing
// it never races the loop's use of it, and the listener's own Close still
// works for Shutdown.
func listenerFD(ln net.Listener) (int, error) {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return -1, fmt.Errorf("epoll front: a %T has no socket to serve from", ln)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, fmt.Errorf("epoll front: duplicating the listener: %w", derr)
	}
	// O_NONBLOCK belongs to the socket both descriptors share; Go's
	// listener has it set already.
	return fd, nil
}

var errLoopClosed = errors.New("the event loop is closed")

// loopProcs counts the processors the process's event loops hold, each
// also while it sleeps (epollWait).
var loopProcs struct {
	sync.Mutex
	n int
}

// reserveProcs counts n more loops and raises GOMAXPROCS, where it must,
// so that one processor is left for the rest of the program: with every
// processor held by a loop, timers, the admin server and the garbage
// collector's workers would run only when the runtime's monitor preempts a
// loop, every 10 ms (the balancer's tests took 40 s instead of 3). The
// returned func gives the count back; GOMAXPROCS is not lowered again,
// since the rest of the program may have come to rely on it.
func reserveProcs(n int, log *slog.Logger) (release func()) {
	loopProcs.Lock()
	defer loopProcs.Unlock()
	loopProcs.n += n
	if have, want := runtime.GOMAXPROCS(0), loopProcs.n+1; have < want {
		runtime.GOMAXPROCS(want)
		log.Info("epoll front: GOMAXPROCS raised: its loops hold a processor each, also while they wait, and the rest of the program needs one", "from", have, "to", want)
	}
	return func() {
		loopProcs.Lock()
		loopProcs.n -= n
		loopProcs.Unlock()
	}
}
