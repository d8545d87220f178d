package balancer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringside/ringside/internal/loadreport"
)

// exchange is one request's attempts on an event loop: the request as
// the workers get it, the workers tried, the one it waits on.
type exchange struct {
	c          *client // nil once the client left: the answer is dropped
	t          *table
	wire       []byte
	tried      []int
	attempts   int
	idempotent bool
	head       bool
	http11     bool // the client's request is HTTP/1.1: its answer may pass verbatim
	closeAfter bool
	refreshed  bool // sent again on a new connection after a pooled one failed
	i          int
	start      time.Duration
	up         *upconn
	lastErr    error
}

func (l *eloop) exchange() *exchange {
	if n := len(l.free); n > 0 {
		x := l.free[n-1]
		l.free = l.free[:n-1]
		return x
	}
	return &exchange{}
}

func (l *eloop) recycle(x *exchange) {
	if cap(x.wire) > 64<<10 || len(l.free) >= 64 {
		return
	}
	*x = exchange{wire: x.wire[:0], tried: x.tried[:0]}
	l.free = append(l.free, x)
}

// attempt sends x to a worker not tried yet (try's rules, on the loop).
func (l *eloop) attempt(x *exchange) {
	b := l.f.B
	if len(x.tried) >= x.attempts {
		l.finish(x, x.lastErr)
		return
	}
	i := b.choose(x.t, x.tried)
	if i < 0 {
		if x.lastErr == nil {
			x.lastErr = errNoWorker
		}
		l.finish(x, x.lastErr)
		return
	}
	x.tried = append(x.tried, i)
	up := x.t.upstreams[i]
	x.i, x.start = i, b.begin(up)
	u, err := l.upstream(up.Addr, true)
	if err != nil {
		l.failed(x, err)
		return
	}
	l.send(x, u)
}

func (l *eloop) send(x *exchange, u *upconn) {
	x.up, u.x = u, x
	u.out, u.sent = x.wire, 0
	u.in, u.eof = u.in[:0], false
	u.fr.reset()
	u.fr.toHEAD = x.head
	u.deadline = l.now.Add(upstreamTimeout)
	if !u.connecting {
		u.flush()
	}
}

// failed ends an attempt that got no answer: the worker is charged with
// it, and the next one is tried while attempts are left.
func (l *eloop) failed(x *exchange, err error) {
	b := l.f.B
	if u := x.up; u != nil {
		x.up, u.x = nil, nil
		u.close()
	}
	b.done(x.t, x.i, x.start, true)
	var s stopErr
	if errors.As(err, &s) {
		l.finish(x, s.err)
		return
	}
	up := x.t.upstreams[x.i]
	x.lastErr = fmt.Errorf("worker %s (%s): %w", up.ID, up.Addr, err)
	b.log.Debug("worker failed", "worker", up.ID, "err", err)
	if x.c == nil {
		l.recycle(x)
		return
	}
	l.attempt(x)
}

// finish answers a request no worker answered: 503 when none could be
// tried, 502 when every try failed.
func (l *eloop) finish(x *exchange, err error) {
	c, closeAfter := x.c, x.closeAfter
	l.recycle(x)
	if c == nil {
		return
	}
	c.x = nil
	status := http.StatusBadGateway
	if errors.Is(err, errNoWorker) {
		status = http.StatusServiceUnavailable
	}
	c.answerError(status, err.Error(), closeAfter)
	c.pump()
}

// upconn is a connection to a worker on an event loop: idle in the loop's
// pool, or carrying one exchange.
type upconn struct {
	l          *eloop
	fd         int
	addr       string
	out        []byte // the exchange's request
	sent       int
	in         []byte
	fr         framer
	x          *exchange
	connecting bool
	reused     bool // taken from the pool: its worker may have closed it meanwhile
	eof        bool
	rdhup      bool // epoll reported the worker's end: read to it
	closed     bool
	idleSince  time.Time
	deadline   time.Time
}

var errTooManyConns = errors.New("the front's connections to this worker are all busy")

// upstream is an idle pooled connection to the worker at addr, or a new
// one being opened.
func (l *eloop) upstream(addr string, pooled bool) (*upconn, error) {
	if p := l.pools[addr]; pooled && len(p) > 0 {
		u := p[len(p)-1]
		l.pools[addr] = p[:len(p)-1]
		u.reused = true
		return u, nil
	}
	// Connections at once to one worker, per loop: past it the attempt
	// fails and the next worker is tried (the fasthttp front's MaxConns).
	if l.perAddr[addr] >= poolSize*4 {
		return nil, errTooManyConns
	}
	sa, err := l.resolve(addr)
	if err != nil {
		return nil, err
	}
	family := unix.AF_INET
	if _, ok := sa.(*unix.SockaddrInet6); ok {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	u := &upconn{l: l, fd: fd, addr: addr}
	u.fr = framer{response: true, headMax: l.headMax, bodyMax: l.bodyMax}
	switch err := unix.Connect(fd, sa); {
	case err == nil:
	case errors.Is(err, unix.EINPROGRESS):
		u.connecting = true
	default:
		unix.Close(fd)
		return nil, fmt.Errorf("connect: %w", err)
	}
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err := l.register(fd); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("epoll: %w", err)
	}
	l.conns[int32(fd)] = u
	l.perAddr[addr]++
	l.f.opened(addr, 1)
	return u, nil
}

// resolve turns a worker's address into a socket address. A host name is
// looked up on the loop, once per table: a loop that waited on DNS per
// request would stall every connection on it (nginx resolves its upstreams
// once, at start).
func (l *eloop) resolve(addr string) (unix.Sockaddr, error) {
	if sa, ok := l.resolved[addr]; ok {
		return sa, nil
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", portStr, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ips, lerr := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		cancel()
		if lerr != nil || len(ips) == 0 {
			return nil, fmt.Errorf("resolving %s: %w", host, lerr)
		}
		ip = ips[0]
	}
	var sa unix.Sockaddr
	if ip = ip.Unmap(); ip.Is4() {
		sa = &unix.SockaddrInet4{Port: int(port), Addr: ip.As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: int(port), Addr: ip.As16()}
	}
	l.resolved[addr] = sa
	return sa, nil
}

func (u *upconn) due() time.Time {
	if u.x == nil {
		return u.idleSince.Add(upstreamIdle)
	}
	return u.deadline
}

var errUpstreamTimeout = errors.New("the worker did not answer in time")

func (u *upconn) expire() {
	if u.x == nil {
		u.close()
		return
	}
	u.l.failed(u.x, errUpstreamTimeout)
}

func (u *upconn) event(ev uint32) {
	if u.connecting {
		if ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return
		}
		errno, err := unix.GetsockoptInt(u.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err == nil && errno != 0 {
			err = syscall.Errno(errno)
		}
		if err != nil {
			u.fail(fmt.Errorf("connect: %w", err))
			return
		}
		u.connecting = false
	}
	if ev&unix.EPOLLOUT != 0 && u.x != nil {
		u.flush()
	}
	if !u.closed && ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		u.rdhup = u.rdhup || ev&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0
		u.read()
	}
}

// flush writes the request until the socket is full.
func (u *upconn) flush() {
	for u.sent < len(u.out) {
		n, err := rawWrite(u.fd, u.out[u.sent:])
		switch {
		case n > 0:
			u.sent += n
		case errors.Is(err, unix.EAGAIN):
			return
		case errors.Is(err, unix.EINTR):
		default:
			u.fail(fmt.Errorf("write: %w", err))
			return
		}
	}
}

// read reads the socket dry and frames the answer.
func (u *upconn) read() {
	l := u.l
	for len(u.in) <= l.headMax+2*int(l.bodyMax) {
		n, err := rawRead(u.fd, l.scratch)
		if n > 0 {
			u.in = append(u.in, l.scratch[:n]...)
			if n < len(l.scratch) && !u.rdhup {
				break // read dry (see client.read)
			}
			continue
		}
		if err == nil {
			u.eof = true
			break
		}
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		u.fail(fmt.Errorf("read: %w", err))
		return
	}
	if u.x == nil {
		// An idle connection that speaks, or ends: the worker closed it
		// (or sent what no request asked for).
		if len(u.in) > 0 || u.eof {
			u.close()
		}
		return
	}
	u.answer()
}

// fail ends the exchange's attempt on this connection. A pooled one that
// failed before any byte of an answer may only have been closed by its
// worker meanwhile: an idempotent request goes once more on a new
// connection to the same worker before it counts as a failure.
func (u *upconn) fail(err error) {
	x := u.x
	if x == nil {
		u.close()
		return
	}
	if u.reused && len(u.in) == 0 && x.idempotent && !x.refreshed {
		x.refreshed = true
		x.up, u.x = nil, nil
		u.close()
		nu, nerr := u.l.upstream(u.addr, false)
		if nerr == nil {
			u.l.send(x, nu)
			return
		}
		err = nerr
	}
	u.l.failed(x, err)
}

var errAnswerCut = errors.New("the worker closed the connection before its answer was whole")

// answer frames the worker's answer and, once it is whole, parses it,
// rewrites its header and hands it to the client.
func (u *upconn) answer() {
	l, x := u.l, u.x
	var n int
	for {
		var ferr *frameError
		n, ferr = u.fr.scan(u.in, u.eof)
		if ferr != nil {
			if ferr.status == http.StatusRequestEntityTooLarge {
				l.failed(x, stop(errAnswerTooLarge))
			} else {
				l.failed(x, fmt.Errorf("malformed answer: %s", ferr.msg))
			}
			return
		}
		if n == 0 {
			if u.eof {
				u.fail(errAnswerCut)
			}
			return
		}
		if !u.fr.interim {
			break
		}
		// A 1xx before the answer (103 Early Hints): dropped, as the
		// fasthttp front's client does.
		u.in = u.in[:copy(u.in, u.in[n:])]
		u.fr.reset()
		u.fr.toHEAD = x.head
	}
	if u.fr.verbatim() && x.http11 {
		// Passed on as it came: not parsed and written again.
		var report []byte
		if r := u.fr.report; r[1] > 0 {
			report = u.in[r[0]:r[1]]
		}
		u.deliver(n, true, report, len(u.in) == n && !u.eof)
		return
	}
	resp := &l.resp
	resp.Reset()
	resp.SkipBody = x.head
	err := l.parse(u.in[:n], func(br *bufio.Reader) error { return resp.ReadLimitBody(br, int(l.bodyMax)) })
	if err != nil {
		l.failed(x, fmt.Errorf("malformed answer: %w", err))
		return
	}
	if u.fr.hop {
		// The framer saw a hop-by-hop line as it scanned the head.
		dropFastHopHeaders(&resp.Header)
	}
	// Bytes past the answer were not asked for: the connection is not
	// reused.
	keep := !resp.ConnectionClose() && len(u.in) == n && !u.eof
	resp.Header.ResetConnectionClose()
	u.deliver(n, false, resp.Header.Peek(loadreport.Header), keep)
}

// deliver ends the exchange with the answer framed in the first n bytes
// read, whose load report says report: the client gets those bytes as
// they came (verbatim: framer.verbatim said it may) or the loop's response,
// parsed from them, written again; the connection is pooled if keep.
func (u *upconn) deliver(n int, verbatim bool, report []byte, keep bool) {
	l, x := u.l, u.x
	b := l.f.B
	if x.t.readsLoadReports {
		b.reported(x.t.upstreams[x.i], string(report))
	}
	b.done(x.t, x.i, x.start, false)
	c, closeAfter := x.c, x.closeAfter
	x.up, u.x = nil, nil
	l.recycle(x)
	if c != nil {
		c.x = nil
		// Queued before the connection is released: the bytes are still
		// its buffer's.
		if verbatim {
			c.pass(u.in[:n], u.fr.headEnd, closeAfter)
		} else {
			c.answer(closeAfter)
		}
	}
	u.release(keep)
	if c != nil {
		c.flush()
		c.pump()
	}
}

// release pools the connection for the next request to its worker, or
// closes it: the worker ends it, the loop is draining, or the worker left
// the table (a departed worker keeps no descriptors here).
func (u *upconn) release(keep bool) {
	l := u.l
	u.in, u.out, u.sent, u.reused = u.in[:0], nil, 0, false
	if cap(u.in) > 64<<10 {
		u.in = nil
	}
	if !keep || l.draining || !l.f.B.serves(u.addr) {
		u.close()
		return
	}
	u.idleSince = l.now
	l.pools[u.addr] = append(l.pools[u.addr], u)
}

func (u *upconn) close() {
	if u.closed {
		return
	}
	u.closed = true
	l := u.l
	if p, ok := l.pools[u.addr]; ok {
		for i, v := range p {
			if v == u {
				p = append(p[:i], p[i+1:]...)
				break
			}
		}
		if len(p) == 0 {
			delete(l.pools, u.addr)
		} else {
			l.pools[u.addr] = p
		}
	}
	delete(l.conns, int32(u.fd))
	unix.Close(u.fd)
	if l.perAddr[u.addr]--; l.perAddr[u.addr] <= 0 {
		delete(l.perAddr, u.addr)
	}
	l.f.opened(u.addr, -1)
}
