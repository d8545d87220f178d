package accept

import (
	"net"
	"syscall"

	"golang.org/x/net/netutil"
)

// MaxConns bounds the connections one listener of a server holds at once:
// past it a new connection waits in the kernel's backlog until one closes,
// instead of costing a descriptor, a goroutine and buffers. Half the
// descriptors the process may open (Go raises the soft limit to the hard
// one at start), so that peers, files and outgoing connections keep the
// other half; at most 16384, a bound on memory where the limit is
// effectively infinite.
var MaxConns = maxConns()

func maxConns() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 1024
	}
	return int(min(max(lim.Cur/2, 16), 16384))
}

// Bound returns ln holding at most MaxConns accepted connections open at
// once; a connection counts until it is closed.
func Bound(ln net.Listener) net.Listener { return netutil.LimitListener(ln, MaxConns) }

// Listen listens on the TCP address addr, bounded.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return Bound(ln), nil
}
