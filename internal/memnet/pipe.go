package memnet

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// bufSize is each direction's buffer, as a socket's: a write returns once
// its bytes are buffered, so two servers that write to each other while
// each holds a lock do not wait on one another — net.Pipe, synchronous,
// made exactly that deadlock look like a dead peer.
const bufSize = 256 << 10

// pipe is one direction of a connection: a bounded buffer with a reader
// end and a writer end, each with its deadline. A waiter re-reads the
// deadline every time it wakes, so a deadline moved or cleared takes
// effect at once and a stale timer only wakes it early.
type pipe struct {
	mu      sync.Mutex
	cond    sync.Cond
	buf     []byte
	rclosed bool // the reading end closed
	wclosed bool // the writing end closed: reads drain, then EOF
	rdl     time.Time
	wdl     time.Time
}

func newPipe() *pipe {
	p := &pipe{}
	p.cond.L = &p.mu
	return p
}

// wait blocks until woken or until deadline, with p.mu held.
func (p *pipe) wait(deadline time.Time) {
	if !deadline.IsZero() {
		t := time.AfterFunc(time.Until(deadline), func() {
			p.mu.Lock()
			p.cond.Broadcast()
			p.mu.Unlock()
		})
		defer t.Stop()
	}
	p.cond.Wait()
}

func expired(deadline time.Time) bool { return !deadline.IsZero() && !time.Now().Before(deadline) }

func (p *pipe) read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		switch {
		case p.rclosed:
			return 0, net.ErrClosed
		case len(p.buf) > 0:
			n := copy(b, p.buf)
			p.buf = p.buf[n:]
			p.cond.Broadcast()
			return n, nil
		case p.wclosed:
			return 0, io.EOF
		case expired(p.rdl):
			return 0, os.ErrDeadlineExceeded
		}
		p.wait(p.rdl)
	}
}

func (p *pipe) write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for len(b) > 0 {
		switch {
		case p.wclosed:
			return n, net.ErrClosed
		case p.rclosed:
			return n, io.ErrClosedPipe
		case expired(p.wdl):
			return n, os.ErrDeadlineExceeded
		}
		if room := bufSize - len(p.buf); room > 0 {
			k := min(room, len(b))
			p.buf = append(p.buf, b[:k]...)
			b, n = b[k:], n+k
			p.cond.Broadcast()
			continue
		}
		p.wait(p.wdl)
	}
	return n, nil
}

func (p *pipe) set(f func()) {
	p.mu.Lock()
	f()
	p.cond.Broadcast()
	p.mu.Unlock()
}

// pipeConn is one end of a buffered in-memory connection.
type pipeConn struct {
	rx, tx        *pipe
	local, remote net.Addr
}

// newPipeConn returns the two ends of a connection between a and b.
func newPipeConn(a, b string) (*pipeConn, *pipeConn) {
	ab, ba := newPipe(), newPipe()
	return &pipeConn{rx: ba, tx: ab, local: addr(a), remote: addr(b)},
		&pipeConn{rx: ab, tx: ba, local: addr(b), remote: addr(a)}
}

func (c *pipeConn) Read(b []byte) (int, error)  { return c.rx.read(b) }
func (c *pipeConn) Write(b []byte) (int, error) { return c.tx.write(b) }

// Close ends both directions: this end reads and writes no more, and the
// peer reads what was sent, then EOF; its writes fail.
func (c *pipeConn) Close() error {
	c.rx.set(func() { c.rx.rclosed = true })
	c.tx.set(func() { c.tx.wclosed = true })
	return nil
}

func (c *pipeConn) LocalAddr() net.Addr  { return c.local }
func (c *pipeConn) RemoteAddr() net.Addr { return c.remote }

func (c *pipeConn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

func (c *pipeConn) SetReadDeadline(t time.Time) error {
	c.rx.set(func() { c.rx.rdl = t })
	return nil
}

func (c *pipeConn) SetWriteDeadline(t time.Time) error {
	c.tx.set(func() { c.tx.wdl = t })
	return nil
}
