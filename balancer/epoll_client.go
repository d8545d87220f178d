package balancer

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"golang.org/x/sys/unix"
)

// client is a client's connection on an event loop. It reads requests,
// frames each, and hands the whole one to an exchange; pipelined requests
// wait in its input until the answer before them is written out.
type client struct {
	l      *eloop
	fd     int
	remote net.Addr // nil on a Unix socket: no X-Forwarded-For
	in     []byte   // bytes read and not yet a request handled
	out    []byte   // bytes to write
	sent   int      // of out, written
	fr     framer
	x      *exchange // the request in flight

	readable   bool // an edge was seen and the socket not yet read dry
	eof        bool // the client shut its side down
	rdhup      bool // epoll reported the client's end: read to it
	continued  bool // 100 Continue was sent for the request being read
	closeAfter bool // close once out is written
	lingering  bool // our side is shut: reading what the client still sends, till its end
	closed     bool
	pumping    bool      // pump is running: a call from inside it returns at once
	begun      time.Time // when the request being read began: HeaderTimeout counts from it
	deadline   time.Time
}

func (l *eloop) addClient(fd int, sa unix.Sockaddr) {
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) // fails harmlessly on a Unix socket
	c := &client{l: l, fd: fd, readable: true, deadline: l.now.Add(l.idle)}
	c.fr = framer{headMax: l.headMax, bodyMax: l.bodyMax}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		c.remote = &net.TCPAddr{IP: a.Addr[:], Port: a.Port}
	case *unix.SockaddrInet6:
		c.remote = &net.TCPAddr{IP: a.Addr[:], Port: a.Port}
	}
	if err := l.register(fd); err != nil {
		l.f.B.log.Warn("epoll front: a client connection could not be watched", "err", err)
		unix.Close(fd)
		return
	}
	l.f.clients.Add(1)
	l.conns[int32(fd)] = c
	c.pump()
}

func (c *client) due() time.Time { return c.deadline }

// expire ends a client past its idle, header or write timeout.
func (c *client) expire() { c.close() }

// idle reports whether the client has nothing in flight, nothing to be
// written and no request begun: shutting down closes it at once.
func (c *client) idle() bool { return c.lingering || c.x == nil && len(c.out) == 0 && len(c.in) == 0 }

// lingerTime bounds the wait for a client's end after ours.
const lingerTime = time.Second

// linger shuts our side down and reads what the client still sends until
// its end: closing with unread bytes would reset the connection, and a
// reset can destroy the answer before the client reads it (nginx's
// lingering_close, net/http's closeWriteAndWait).
func (c *client) linger() {
	c.lingering = true
	c.in = nil
	c.deadline = c.l.now.Add(lingerTime)
	if unix.Shutdown(c.fd, unix.SHUT_WR) != nil || c.eof {
		c.close()
		return
	}
	for {
		n, err := rawRead(c.fd, c.l.scratch)
		switch {
		case n > 0:
		case errors.Is(err, unix.EAGAIN):
			return
		case errors.Is(err, unix.EINTR):
		default: // the end, or an error
			c.close()
			return
		}
	}
}

func (c *client) event(ev uint32) {
	if ev&(unix.EPOLLERR|unix.EPOLLHUP) != 0 {
		c.close()
		return
	}
	if c.lingering {
		c.linger()
		return
	}
	if ev&unix.EPOLLOUT != 0 {
		c.flush()
	}
	if ev&(unix.EPOLLIN|unix.EPOLLRDHUP) != 0 {
		c.readable = true
		c.rdhup = c.rdhup || ev&unix.EPOLLRDHUP != 0
	}
	c.pump()
}

// inMax bounds what a client's input holds: a whole request at its limits.
func (c *client) inMax() int { return c.l.headMax + 2*int(c.l.bodyMax) + len(c.l.scratch) }

// pump reads what the client sent and serves the requests in it, one at
// a time, until it waits on a worker, on the client, or on its writes.
func (c *client) pump() {
	if c.pumping {
		return // the running pump goes on from the state this call left
	}
	c.pumping = true
	defer func() { c.pumping = false }()
	for !c.closed {
		if c.readable && !c.eof && len(c.in) < c.inMax() {
			if !c.read() {
				return
			}
		}
		if c.x != nil || len(c.out) > 0 {
			return // the answer before the next request is not out yet
		}
		if c.closeAfter {
			c.linger()
			return
		}
		if len(c.in) == 0 {
			if c.eof {
				c.close()
				return
			}
			if cap(c.in) > 16<<10 {
				c.in = nil // an idle client keeps no large buffer
			}
			c.deadline = c.l.now.Add(c.l.idle)
			return
		}
		n, ferr := c.fr.scan(c.in, c.eof)
		if ferr != nil {
			c.refuse(ferr.status, "malformed request: "+ferr.msg)
			continue
		}
		if n == 0 {
			if c.eof {
				c.close() // a request cut short: nothing to answer
				return
			}
			if len(c.in) >= c.inMax() { // the framer bounds a message below this; a guard
				c.refuse(http.StatusRequestEntityTooLarge, "the request is over the front's limits")
				continue
			}
			if c.fr.headDone() && c.fr.expect && !c.continued {
				c.continued = true
				c.write([]byte("HTTP/1.1 100 Continue\r\n\r\n"))
				if len(c.out) > 0 {
					return
				}
			}
			if c.begun.IsZero() {
				c.begun = c.l.now
			}
			c.deadline = c.begun.Add(c.l.header)
			if !c.readable {
				return
			}
			continue
		}
		c.request(n)
	}
}

// read reads the socket dry (or to the input's bound); false once the
// client is gone.
func (c *client) read() bool {
	for len(c.in) < c.inMax() {
		n, err := rawRead(c.fd, c.l.scratch)
		switch {
		case n > 0:
			c.in = append(c.in, c.l.scratch[:n]...)
			if n < len(c.l.scratch) && !c.rdhup {
				// Read dry: an edge-triggered epoll reports the next bytes
				// when they come, so the read that would say EAGAIN is
				// spared (nginx does the same). Not once the client's end
				// was reported: no edge would tell of it again.
				c.readable = false
				return true
			}
		case err == nil:
			c.eof = true
			return true
		case errors.Is(err, unix.EAGAIN):
			c.readable = false
			return true
		case errors.Is(err, unix.EINTR):
		default:
			c.close()
			return false
		}
	}
	return true
}

// request starts the exchange of the whole request at the head of the
// input, or refuses it.
func (c *client) request(n int) {
	l := c.l
	x := l.exchange()
	var status int
	var why string
	if c.fr.plain(c.in[:n]) {
		status, why = c.plainRequest(x, c.in[:n])
	} else {
		status, why = c.parsedRequest(x, c.in[:n])
	}
	c.in = c.in[:copy(c.in, c.in[n:])]
	c.fr.reset()
	c.continued = false
	c.begun, c.deadline = time.Time{}, time.Time{}
	if status != 0 {
		l.recycle(x)
		c.refuse(status, why)
		return
	}
	t := l.f.B.table.Load()
	if t == nil {
		closeAfter := x.closeAfter
		l.recycle(x)
		c.answerError(http.StatusServiceUnavailable, errNoWorker.Error(), closeAfter)
		return
	}
	x.c, x.t, x.attempts = c, t, 1
	if x.idempotent {
		x.attempts += l.f.B.retries
	}
	c.x = x
	l.attempt(x)
}

// parsedRequest makes x the request in msg as the worker gets it, parsed
// with fasthttp's reader, checked and rewritten (forwardable) and written
// out again, or returns the status and reason to refuse it with.
func (c *client) parsedRequest(x *exchange, msg []byte) (int, string) {
	l := c.l
	req := &l.req
	req.Reset()
	// The request goes on with the client's header names and path.
	req.Header.DisableNormalizing()
	err := l.parse(msg, func(br *bufio.Reader) error {
		if err := req.Header.Read(br); err != nil {
			return err
		}
		return req.ContinueReadBody(br, int(l.bodyMax), false)
	})
	if err != nil {
		return http.StatusBadRequest, "malformed request: " + err.Error()
	}
	x.closeAfter = req.Header.ConnectionClose() || l.draining
	if status, why := forwardable(req, c.remote); status != 0 {
		return status, why
	}
	x.head, x.http11, x.idempotent = req.Header.IsHead(), req.Header.IsHTTP11(), fastIdempotent(req)
	if len(req.Header.Host()) == 0 {
		// Write takes the host from an absolute target, and normalises
		// the path as it does, unless told not to.
		req.URI().DisablePathNormalizing = true
	}
	if err := l.serialise(&x.wire, req.Write); err != nil {
		return http.StatusBadRequest, "malformed request: " + err.Error()
	}
	return 0, ""
}

// answer queues the worker's answer, parsed into the loop's response. The
// caller flushes.
func (c *client) answer(closeAfter bool) {
	resp := &c.l.resp
	if closeAfter || c.l.draining {
		resp.SetConnectionClose()
		c.closeAfter = true
	}
	if err := c.l.serialise(&c.out, resp.Write); err != nil {
		c.close()
	}
}

// pass queues a worker's answer as it came (upconn.deliver); the head ends
// at headEnd, in CRLF. The caller flushes.
func (c *client) pass(msg []byte, headEnd int, closeAfter bool) {
	if !closeAfter && !c.l.draining {
		c.out = append(c.out, msg...)
		return
	}
	c.closeAfter = true
	c.out = append(c.out, msg[:headEnd-2]...)
	c.out = append(c.out, "Connection: close\r\n\r\n"...)
	c.out = append(c.out, msg[headEnd:]...)
}

// refuse answers a request that will not be served and closes the
// connection after: what follows it cannot be trusted to be framed.
func (c *client) refuse(status int, msg string) {
	c.in = c.in[:0]
	c.answerError(status, msg, true)
}

func (c *client) answerError(status int, msg string, closeAfter bool) {
	c.closeAfter = c.closeAfter || closeAfter || c.l.draining
	msg += "\n"
	c.out = fmt.Appendf(c.out, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nContent-Length: %d\r\n", status, http.StatusText(status), len(msg))
	if c.closeAfter {
		c.out = append(c.out, "Connection: close\r\n"...)
	}
	c.out = append(append(c.out, "\r\n"...), msg...)
	c.flush()
}

// write queues b and writes what the socket takes.
func (c *client) write(b []byte) {
	c.out = append(c.out, b...)
	c.flush()
}

// flush writes the output until the socket is full; a client that takes
// nothing for writeTimeout is closed by the sweep.
func (c *client) flush() {
	if len(c.out) == 0 {
		return
	}
	for c.sent < len(c.out) && !c.closed {
		n, err := rawWrite(c.fd, c.out[c.sent:])
		switch {
		case n > 0:
			c.sent += n
		case errors.Is(err, unix.EAGAIN):
			c.deadline = c.l.now.Add(writeTimeout)
			return
		case errors.Is(err, unix.EINTR):
		default:
			c.close()
			return
		}
	}
	if c.sent == len(c.out) {
		c.out, c.sent = c.out[:0], 0
		if cap(c.out) > 64<<10 {
			c.out = nil
		}
		c.deadline = time.Time{}
	}
}

// close closes the connection; an exchange in flight goes on without it
// (its answer is dropped), so the worker's connection stays usable.
func (c *client) close() {
	if c.closed {
		return
	}
	c.closed = true
	if c.x != nil {
		c.x.c = nil
		c.x = nil
	}
	delete(c.l.conns, int32(c.fd))
	unix.Close(c.fd)
	c.l.f.clients.Add(-1)
}
