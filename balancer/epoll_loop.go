package balancer

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"

	"github.com/ringside/ringside/internal/accept"
)

// eloop is one event loop of the epoll front. Everything in it but force
// and the eventfd is touched by its own thread only.
type eloop struct {
	f        *EpollFront
	ep, wfd  int // the epoll instance; an eventfd that wakes it
	lfd      int // the listener's duplicate, −1 once it stopped accepting
	conns    map[int32]handler
	pools    map[string][]*upconn // idle keep-alive connections per worker
	perAddr  map[string]int       // connections open per worker, this loop
	resolved map[string]unix.Sockaddr
	force    atomic.Bool

	headMax int
	bodyMax int64
	idle    time.Duration
	header  time.Duration

	now       time.Time
	nextTick  time.Time
	listening bool      // the listener is in the epoll set
	acceptAt  time.Time // when to try accepting again after running out
	backoff   time.Duration
	draining  bool
	swept     uint64

	scratch []byte
	rd      bytes.Reader
	br      *bufio.Reader
	bw      *bufio.Writer
	req     fasthttp.Request
	resp    fasthttp.Response
	free    []*exchange
}

// handler is a connection on the loop: a client's or a worker's.
type handler interface {
	event(ev uint32)
	expire()
	due() time.Time
}

const (
	// tick is how often a loop checks its deadlines: the timeouts' grain.
	tick = 50 * time.Millisecond
	// acceptBatch bounds the connections accepted per wake-up, so a flood
	// of them does not starve the requests of the connections it has.
	acceptBatch = 64
	connEvents  = unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET
)

func newLoop(f *EpollFront, ln net.Listener) (*eloop, error) {
	lfd, err := listenerFD(ln)
	if err != nil {
		return nil, err
	}
	l := &eloop{
		f: f, lfd: lfd, ep: -1, wfd: -1,
		conns: map[int32]handler{}, pools: map[string][]*upconn{}, perAddr: map[string]int{},
		resolved: map[string]unix.Sockaddr{},
		headMax:  cmp.Or(f.HeadBytes, defaultHeadBytes),
		bodyMax:  int64(cmp.Or(f.MaxBodyBytes, defaultBodyBytes)),
		idle:     cmp.Or(f.IdleTimeout, 90*time.Second),
		header:   cmp.Or(f.HeaderTimeout, 10*time.Second),
		scratch:  make([]byte, 64<<10),
	}
	// The parser needs a whole head in its buffer, empty lines before a
	// request-line included.
	l.br = bufio.NewReaderSize(nil, l.headMax+4096)
	l.bw = bufio.NewWriterSize(nil, 4096)
	if l.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		l.release()
		return nil, fmt.Errorf("epoll front: %w", err)
	}
	if l.wfd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		l.release()
		return nil, fmt.Errorf("epoll front: %w", err)
	}
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, l.wfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(l.wfd)}); err != nil {
		l.release()
		return nil, fmt.Errorf("epoll front: %w", err)
	}
	if err := l.listen(); err != nil {
		l.release()
		return nil, err
	}
	return l, nil
}

// release closes the loop's own descriptors, once it has stopped and no
// one can wake it (the eventfd would be written after its close, or into
// a descriptor reused meanwhile).
func (l *eloop) release() {
	for _, fd := range []int{l.lfd, l.wfd, l.ep} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	l.lfd, l.wfd, l.ep = -1, -1, -1
}

// wake makes the loop's epoll_wait return (from any goroutine).
func (l *eloop) wake() {
	var one = [8]byte{1}
	unix.Write(l.wfd, one[:])
}

// listen puts the listener in the epoll set; EPOLLEXCLUSIVE wakes one of
// the loops that share a listener, not all.
func (l *eloop) listen() error {
	if l.listening || l.lfd < 0 {
		return nil
	}
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, l.lfd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLEXCLUSIVE, Fd: int32(l.lfd)}); err != nil {
		return fmt.Errorf("epoll front: watching the listener: %w", err)
	}
	l.listening = true
	return nil
}

func (l *eloop) unlisten() {
	if l.listening {
		unix.EpollCtl(l.ep, unix.EPOLL_CTL_DEL, l.lfd, nil)
		l.listening = false
	}
}

// run is the loop: wait for events, serve them, check deadlines; it ends
// once draining finds no client left.
func (l *eloop) run() error {
	// The loop owns its thread as nginx's worker owns its process: no
	// other goroutine's work lands between its system calls.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer l.closeAll()
	events := make([]unix.EpollEvent, 256)
	l.now = time.Now()
	l.nextTick = l.now.Add(tick)
	for {
		wait := l.nextTick
		if !l.acceptAt.IsZero() && l.acceptAt.Before(wait) {
			wait = l.acceptAt
		}
		n, err := epollWait(l.ep, events, max(int(wait.Sub(l.now).Milliseconds()), 0))
		l.now = time.Now()
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("epoll front: epoll_wait: %w", err)
		}
		for _, ev := range events[:n] {
			switch fd := ev.Fd; {
			case int(fd) == l.wfd:
				var b [8]byte
				unix.Read(l.wfd, b[:]) // drain runs below
			case int(fd) == l.lfd:
				l.accept()
			default:
				if h := l.conns[fd]; h != nil {
					h.event(ev.Events)
				}
			}
		}
		if !l.acceptAt.IsZero() && !l.now.Before(l.acceptAt) {
			l.acceptAt = time.Time{}
			if err := l.listen(); err != nil {
				return err
			}
		}
		if !l.now.Before(l.nextTick) {
			l.nextTick = l.now.Add(tick)
			l.sweep()
		}
		if l.f.shutdown.Load() {
			l.drain()
		}
		if l.draining && l.clientsLeft() == 0 {
			return nil
		}
	}
}

// accept takes the waiting connections. Out of descriptors (or buffers)
// the listener leaves the epoll set for a while and the loop serves the
// connections it has; over accept.MaxConns clients, until one closes.
func (l *eloop) accept() {
	for range acceptBatch {
		if l.f.clients.Load() >= int64(accept.MaxConns) {
			l.unlisten()
			return
		}
		fd, sa, err := unix.Accept4(l.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		switch {
		case err == nil:
			l.backoff = 0
			l.addClient(fd, sa)
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR), errors.Is(err, unix.ECONNABORTED):
			if errors.Is(err, unix.EAGAIN) {
				return
			}
		case accept.Temporary(err):
			l.backoff = min(max(2*l.backoff, accept.Min), accept.Max)
			l.f.B.log.Warn("accept failed; retrying", "front", "epoll", "err", err, "in", l.backoff)
			l.unlisten()
			l.acceptAt = l.now.Add(l.backoff)
			return
		default:
			l.f.B.log.Error("accept failed; the loop stops accepting", "front", "epoll", "err", err)
			l.unlisten()
			return
		}
	}
}

// sweep ends what is past its deadline, closes the idle connections of
// workers that left the table, and takes the listener back once clients
// are under the bound again.
func (l *eloop) sweep() {
	for _, h := range l.conns {
		if d := h.due(); !d.IsZero() && l.now.After(d) {
			h.expire()
		}
	}
	if seq := l.f.B.Seq(); seq != l.swept {
		l.swept = seq
		clear(l.resolved)
		for addr, idle := range l.pools {
			if !l.f.B.serves(addr) {
				delete(l.pools, addr)
				for _, u := range idle {
					u.close()
				}
			}
		}
	}
	if !l.listening && l.acceptAt.IsZero() && !l.draining && l.lfd >= 0 && l.f.clients.Load() < int64(accept.MaxConns) {
		if err := l.listen(); err != nil {
			l.f.B.log.Error("the listener cannot be watched again", "front", "epoll", "err", err)
		}
	}
}

// drain begins the shutdown: no more accepting, idle clients closed, busy
// ones closed after their answer; forced, every client closed now.
func (l *eloop) drain() {
	if !l.f.shutdown.Load() {
		return
	}
	if !l.draining {
		l.draining = true
		l.unlisten()
		unix.Close(l.lfd)
		l.lfd = -1
		l.acceptAt = time.Time{}
	}
	force := l.force.Load()
	for _, h := range l.conns {
		if c, ok := h.(*client); ok && (force || c.idle()) {
			c.close()
		}
	}
}

func (l *eloop) clientsLeft() int {
	n := 0
	for _, h := range l.conns {
		if _, ok := h.(*client); ok {
			n++
		}
	}
	return n
}

// closeAll closes every connection and the loop's descriptors.
func (l *eloop) closeAll() {
	for _, h := range l.conns {
		if c, ok := h.(*client); ok {
			c.close()
		}
	}
	// The exchanges still in flight have lost their clients: each is
	// charged as a failure, so the workers' counts of requests in flight
	// end at zero.
	for _, h := range l.conns {
		if u, ok := h.(*upconn); ok {
			if u.x != nil {
				l.failed(u.x, errLoopClosed)
			} else {
				u.close()
			}
		}
	}
	if l.lfd >= 0 {
		unix.Close(l.lfd)
		l.lfd = -1
	}
}

func (l *eloop) register(fd int) error {
	return unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: connEvents, Fd: int32(fd)})
}

// parse reads the whole message in msg with fasthttp's reader: read gets
// the loop's bufio.Reader over it. A message the framer ended elsewhere
// than the parser is refused, never passed on half-read.
func (l *eloop) parse(msg []byte, read func(*bufio.Reader) error) error {
	l.rd.Reset(msg)
	l.br.Reset(&l.rd)
	err := read(l.br)
	if err == nil && l.br.Buffered()+l.rd.Len() != 0 {
		err = errors.New("the message's framing is ambiguous")
	}
	l.br.Reset(nil)
	return err
}

// appender is an io.Writer that appends to a byte slice: the loop's
// bufio.Writer serialises messages into a connection's output with it.
type appender struct{ b *[]byte }

func (a appender) Write(p []byte) (int, error) {
	*a.b = append(*a.b, p...)
	return len(p), nil
}

// serialise writes a message with write into *dst.
func (l *eloop) serialise(dst *[]byte, write func(*bufio.Writer) error) error {
	l.bw.Reset(appender{dst})
	err := write(l.bw)
	if err == nil {
		err = l.bw.Flush()
	}
	l.bw.Reset(nil)
	return err
}
