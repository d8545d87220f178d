package balancer

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The loop's system calls that never block — reads and writes on
// non-blocking sockets, and an epoll_wait that only looks — are made raw:
// the runtime is not told, so it does not hand the loop's processor to
// another thread when one takes a while (a loopback write does the
// receiver's TCP work too, often past the 20 µs after which the runtime's
// monitor hands a processor in a system call over), and no thread is woken
// for it. Only the epoll_wait that sleeps goes through the runtime.

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

// poll returns the events ready now, without waiting.
func poll(ep int, events []unix.EpollEvent) (int, error) {
	n, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(ep), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}
