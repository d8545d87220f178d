package transport

// Polling a connection for the ELECTED that follows an ELECTION, instead
// of sleeping until it comes (docs/ringnode.md, "The receiver kept
// awake"). A server that forwarded an ELECTION gets the round's ELECTED
// on the same connection one trip later; a reader asleep in the kernel
// then pays a wake-up at every hop of that round, which on a virtual
// machine whose idle cores halt is most of a hop. Polling holds the
// reader's thread runnable instead, yielding its core to every other
// runnable task between polls, for a bounded window.

import (
	"bufio"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxSpin bounds SpinAfterElection's window: while one connection polls,
// the server's other frames — hop acknowledgements among them, resent
// after a default 10 ms — may wait out the window.
const MaxSpin = 5 * time.Millisecond

// SpinAfterElection makes every inbound connection that delivers an
// ELECTION poll for its next frame for up to d (0: never) before its
// reader sleeps; the ELECTED, or the window's end, ends the polling. While
// one connection polls, the other connections' frames wait for the Go
// runtime's own network poll (at most the window, with one processor:
// keep d well under the acknowledgement timeout; it is cut to MaxSpin).
// A message queued for a peer's goroutine ends the polling too: it may
// wait on a dial, which only that network poll completes, and the
// ELECTED cannot come round before it has gone out. Set it before
// serving.
func (t *Transport) SpinAfterElection(d time.Duration) { t.spin = min(d, MaxSpin) }

// spinner polls one connection's socket without consuming from it: once
// it is readable the frame read that follows returns without parking.
type spinner struct {
	raw    syscall.RawConn
	r      *bufio.Reader
	queued *atomic.Int32 // the transport's queued messages
	until  time.Time
}

// newSpinner returns nil for a connection that is not a socket (tests'
// in-memory pipes) or a reader that is not the bufio one ServeConn reads.
func newSpinner(c net.Conn, r io.Reader, queued *atomic.Int32) *spinner {
	sc, ok := c.(syscall.Conn)
	br, isBuf := r.(*bufio.Reader)
	if !ok || !isBuf {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return &spinner{raw: raw, r: br, queued: queued}
}

// arm starts (or extends) the window to d from now.
func (s *spinner) arm(d time.Duration) { s.until = time.Now().Add(d) }

// disarm ends the window.
func (s *spinner) disarm() { s.until = time.Time{} }

// wait polls until a frame's bytes are buffered or readable, the socket
// has an error or hang-up to report, a message is queued, or the window
// ends.
func (s *spinner) wait() {
	for s.r.Buffered() == 0 && s.queued.Load() == 0 && time.Now().Before(s.until) {
		ready := true
		if err := s.raw.Control(func(fd uintptr) { ready = readable(fd) }); err != nil || ready {
			return
		}
		// Other goroutines of this process (timers, the lease) run
		// here; the kernel's yield gives the core to other processes,
		// the next hop's sender among them.
		runtime.Gosched()
		unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
}

// readable polls fd once without blocking: true when a read would not
// block (data, end of stream or an error to report).
func readable(fd uintptr) bool {
	pfd := unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	var zero unix.Timespec
	n, _, errno := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
	return errno != 0 || n > 0
}
