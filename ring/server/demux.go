package server

import (
	"bufio"
	"net"
	"sync"
	"time"

	"github.com/ringside/ringside/internal/accept"
)

// chanListener hands the HTTP server the connections that accept sorted
// out as HTTP.
type chanListener struct {
	addr  net.Addr
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) deliver(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// peekedConn reads first what was buffered while sniffing the protocol.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// accept splits the one port between peers and HTTP: peer frames start
// with the wire magic "RG", which no HTTP method does.
func (s *Server) accept(httpLn *chanListener) {
	defer httpLn.Close()
	accept.Loop(s.ln, s.log, func(c net.Conn) {
		go func() {
			r := bufio.NewReader(c)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			head, err := r.Peek(2)
			c.SetReadDeadline(time.Time{})
			if err != nil {
				c.Close()
				return
			}
			if head[0] == 'R' && head[1] == 'G' {
				s.tr.ServeConn(c, r)
				return
			}
			httpLn.deliver(&peekedConn{Conn: c, r: r})
		}()
	})
}
