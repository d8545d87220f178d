package accept

import (
	"net"
	"sync"
	"syscall"
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
func Bound(ln net.Listener) net.Listener { return bound(ln, MaxConns) }

// bound is x/net/netutil's LimitListener but for one thing: a socket it
// accepts keeps its descriptor reachable (syscall.Conn), which a reader
// that polls its socket needs (ring/transport's spinner); LimitListener's
// connection hides it.
func bound(ln net.Listener, n int) net.Listener {
	return &boundListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type boundListener struct {
	net.Listener
	sem  chan struct{} // one token per open connection
	once sync.Once
	done chan struct{} // closed by Close: an Accept waiting for a token ends
}

// Accept takes a token before it accepts, so that past the bound a
// connection waits in the kernel's backlog, not in this process.
func (l *boundListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	bc := &boundConn{Conn: c, release: func() { <-l.sem }}
	if _, ok := c.(syscall.Conn); ok {
		return boundSocket{bc}, nil
	}
	return bc, nil
}

func (l *boundListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { close(l.done) })
	return err
}

// boundConn gives its token back once, at its first Close.
type boundConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *boundConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// boundSocket is a boundConn over a socket (a syscall.Conn).
type boundSocket struct{ *boundConn }

func (c boundSocket) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}

// Listen listens on the TCP address addr, bounded.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return Bound(ln), nil
}
