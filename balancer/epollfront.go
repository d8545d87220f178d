//go:build linux

package balancer

// PROTOTYPE, to be reverted after measuring: an upper bound for a front
// on one epoll loop per core, both sides on the loop, as nginx runs. It
// serves only what lb-proxy sends: keep-alive requests without a body,
// answers with a Content-Length. No limits, no retries, no timeouts.

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

type EpollFront struct {
	B    *Balancer
	Addr string
}

func (f *EpollFront) ListenAndServe() error {
	ap, err := netip.ParseAddrPort(f.Addr)
	if err != nil {
		return err
	}
	n := runtime.GOMAXPROCS(0)
	errc := make(chan error, n)
	for range n {
		lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		unix.SetsockoptInt(lfd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		unix.SetsockoptInt(lfd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		if err := unix.Bind(lfd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
			return err
		}
		if err := unix.Listen(lfd, 1024); err != nil {
			return err
		}
		go func() { errc <- f.loop(lfd) }()
	}
	return <-errc
}

func (f *EpollFront) Shutdown(context.Context) error { return nil }

type econn struct {
	fd   int
	in   []byte
	out  []byte
	peer *econn // client ↔ its upstream while a request is in flight
	up   bool
	addr string
	i    int
	t    *table
	st   time.Duration
}

type eloop struct {
	f     *EpollFront
	ep    int
	conns map[int]*econn
	idle  map[string][]*econn
	buf   []byte
}

func (f *EpollFront) loop(lfd int) error {
	runtime.LockOSThread()
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	l := &eloop{f: f, ep: ep, conns: map[int]*econn{}, idle: map[string][]*econn{}, buf: make([]byte, 64<<10)}
	unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, lfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(lfd)})
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(ep, events, -1)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return err
		}
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			if fd == lfd {
				for {
					cfd, _, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
					if err != nil {
						break
					}
					unix.SetsockoptInt(cfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
					l.conns[cfd] = &econn{fd: cfd}
					unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, cfd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(cfd)})
				}
				continue
			}
			c := l.conns[fd]
			if c == nil {
				continue
			}
			l.readable(c)
		}
	}
}

func (l *eloop) close(c *econn) {
	unix.Close(c.fd)
	delete(l.conns, c.fd)
	if c.up {
		l.idle[c.addr] = slices.DeleteFunc(l.idle[c.addr], func(x *econn) bool { return x == c })
	}
	if p := c.peer; p != nil {
		p.peer = nil
		if !p.up {
			l.close(p)
		}
	}
}

func (l *eloop) readable(c *econn) {
	for {
		n, err := unix.Read(c.fd, l.buf)
		if n > 0 {
			c.in = append(c.in, l.buf[:n]...)
			continue
		}
		if err == unix.EAGAIN {
			break
		}
		l.close(c)
		return
	}
	if c.up {
		l.answer(c)
	} else if c.peer == nil {
		l.request(c)
	}
}

var hdrEnd = []byte("\r\n\r\n")

func (l *eloop) request(c *econn) {
	end := bytes.Index(c.in, hdrEnd)
	if end < 0 {
		return
	}
	head := c.in[:end+2]
	b := l.f.B
	t := b.table.Load()
	i := b.choose(t, nil)
	if i < 0 {
		l.close(c)
		return
	}
	up := t.upstreams[i]
	u := l.upstream(up.Addr)
	if u == nil {
		l.close(c)
		return
	}
	start := b.begin(up)
	u.out = append(u.out[:0], head...)
	u.out = append(u.out, "X-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\n\r\n"...)
	c.in = c.in[:copy(c.in, c.in[end+4:])]
	u.peer, c.peer, u.i, u.t, u.st = c, u, i, t, start
	if _, err := unix.Write(u.fd, u.out); err != nil {
		l.close(u)
		l.close(c)
	}
}

func (l *eloop) upstream(addr string) *econn {
	if p := l.idle[addr]; len(p) > 0 {
		u := p[len(p)-1]
		l.idle[addr] = p[:len(p)-1]
		return u
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	// Blocking connect on loopback, then non-blocking: a prototype.
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		unix.Close(fd)
		return nil
	}
	unix.SetNonblock(fd, true)
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	u := &econn{fd: fd, up: true, addr: addr}
	l.conns[fd] = u
	unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(fd)})
	return u
}

var clHeader = []byte("\r\ncontent-length:")

func (l *eloop) answer(u *econn) {
	end := bytes.Index(u.in, hdrEnd)
	if end < 0 {
		return
	}
	lower := bytes.ToLower(u.in[:end])
	k := bytes.Index(lower, clHeader)
	if k < 0 {
		l.close(u)
		return
	}
	v := lower[k+len(clHeader):]
	if e := bytes.IndexByte(v, '\r'); e >= 0 {
		v = v[:e]
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
	if err != nil || len(u.in) < end+4+n {
		return
	}
	total := end + 4 + n
	c := u.peer
	b := l.f.B
	b.done(u.t, u.i, u.st, false)
	if c != nil {
		unix.Write(c.fd, u.in[:total])
		c.peer = nil
	}
	u.in = u.in[:copy(u.in, u.in[total:])]
	u.peer = nil
	l.idle[u.addr] = append(l.idle[u.addr], u)
	if c != nil && len(c.in) > 0 {
		l.request(c)
	}
}
