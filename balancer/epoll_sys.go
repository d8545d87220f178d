package balancer

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The loop's system calls are made raw — reads and writes on non-blocking
// sockets, and epoll_wait, the one that sleeps, too: the runtime is not
// told, so it does not hand the loop's processor to another thread when
// one takes a while (a loopback write does the receiver's TCP work too,
// often past the 20 µs after which the runtime's monitor hands a
// processor in a system call over), and no thread is woken, nor the
// processor taken back, around a sleep. A loop thus holds its processor
// while it waits, as an nginx worker holds its process; the front keeps
// one more processor than its loops for the rest of the program
// (reserveProcs). A signal to the loop's thread — the runtime's preemption
// — ends a wait with EINTR, and the loop goes on through a function call,
// where a goroutine asked to yield does.

func rawRead(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

func rawWrite(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// epollWait waits up to ms milliseconds for events (0: only looks).
func epollWait(ep int, events []unix.EpollEvent, ms int) (int, error) {
	n, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(ep), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(ms), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}
