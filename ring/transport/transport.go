// Package transport carries ring messages between servers over TCP, one
// persistent connection per peer, framed by package wire. Sends are
// asynchronous so a slow or dead peer never stalls the election loop; a
// message that cannot be delivered is handed back as unreachable, which is
// how the state machine learns to skip a dead successor.
package transport

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/wire"
)

// Timeouts of one attempt to reach a peer. Loopback refuses a dead port at
// once; a vanished container address would otherwise hang for seconds.
const (
	DialTimeout  = 250 * time.Millisecond
	WriteTimeout = 500 * time.Millisecond
	queueLen     = 1024
)

// Handler receives inbound messages and undeliverable outbound ones. Both
// are called from transport goroutines and must not block for long.
type Handler struct {
	Deliver     func(ring.Message)
	Unreachable func(ring.Message)
	// Malformed is told about a connection closed for a bad frame.
	Malformed func(remote string, err error)
}

// Transport is one server's TCP endpoint.
type Transport struct {
	h   Handler
	log *slog.Logger

	mu     sync.Mutex
	addrs  map[ring.UID]string
	peers  map[ring.UID]*peer
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// New returns a transport that sends to peers and serves the inbound
// connections handed to ServeConn (or accepted by Serve).
func New(h Handler, log *slog.Logger) *Transport {
	return &Transport{h: h, log: log, addrs: map[ring.UID]string{}, peers: map[ring.UID]*peer{}, conns: map[net.Conn]struct{}{}}
}

// SetPeers installs the UID → peer address map from ring metadata.
func (t *Transport) SetPeers(addrs map[ring.UID]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addrs = addrs
	for u, p := range t.peers {
		if addrs[u] != p.addr {
			close(p.queue)
			delete(t.peers, u)
		}
	}
}

// Send queues m for m.To. It never blocks; an unknown peer or a full queue
// makes m unreachable at once.
func (t *Transport) Send(m ring.Message) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	p := t.peers[m.To]
	if p == nil {
		addr, ok := t.addrs[m.To]
		if !ok {
			t.mu.Unlock()
			t.h.Unreachable(m)
			return
		}
		p = &peer{t: t, addr: addr, queue: make(chan ring.Message, queueLen)}
		t.peers[m.To] = p
		t.wg.Add(1)
		go p.run()
	}
	select {
	case p.queue <- m:
		t.mu.Unlock()
	default:
		t.mu.Unlock()
		t.h.Unreachable(m)
	}
}

// Close stops accepting, closes every connection and waits for the
// transport's goroutines.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	for u, p := range t.peers {
		close(p.queue)
		delete(t.peers, u)
	}
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return nil
}

// Serve accepts peer connections from ln until it fails (is closed).
func (t *Transport) Serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go t.ServeConn(c, nil)
	}
}

// ServeConn reads frames from c until it closes or sends garbage; r, if
// not nil, is a reader over c that already buffered some of its bytes.
func (t *Transport) ServeConn(c net.Conn, r io.Reader) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		c.Close()
		return
	}
	t.conns[c] = struct{}{}
	t.wg.Add(1)
	t.mu.Unlock()
	defer t.wg.Done()
	defer func() {
		c.Close()
		t.mu.Lock()
		delete(t.conns, c)
		t.mu.Unlock()
	}()
	if r == nil {
		r = bufio.NewReader(c)
	}
	var buf [wire.FrameSize]byte
	for {
		m, err := wire.Read(r, &buf)
		if err != nil {
			if errors.Is(err, wire.ErrMalformed) {
				t.log.Warn("closing peer connection on a malformed frame", "remote", c.RemoteAddr(), "err", err)
				if t.h.Malformed != nil {
					t.h.Malformed(c.RemoteAddr().String(), err)
				}
			}
			return
		}
		t.h.Deliver(m)
	}
}

// peer owns the outbound connection to one member and sends its queue in
// order.
type peer struct {
	t     *Transport
	addr  string
	queue chan ring.Message
	conn  net.Conn
	gone  chan struct{} // closed when the peer closes conn
	buf   []byte
}

func (p *peer) run() {
	defer p.t.wg.Done()
	defer func() {
		if p.conn != nil {
			p.conn.Close()
		}
	}()
	for m := range p.queue {
		// A cached connection may be to a peer that restarted since;
		// one redial tells a stale connection from a dead peer.
		if err := p.write(m); err != nil {
			if err = p.write(m); err != nil {
				p.t.h.Unreachable(m)
			}
		}
	}
}

func (p *peer) write(m ring.Message) error {
	if p.conn != nil {
		select {
		case <-p.gone:
			// The peer hung up (it died or restarted): writing would
			// land in the socket buffer and be lost without an error.
			p.conn.Close()
			p.conn = nil
		default:
		}
	}
	if p.conn == nil {
		c, err := net.DialTimeout("tcp", p.addr, DialTimeout)
		if err != nil {
			return err
		}
		p.conn, p.gone = c, make(chan struct{})
		// Peers never write on this connection, so a read returns only
		// when the peer's end closes — the earliest sign that it died.
		go func(c net.Conn, gone chan struct{}) {
			io.Copy(io.Discard, c)
			close(gone)
		}(c, p.gone)
	}
	p.buf = wire.Append(p.buf[:0], m)
	p.conn.SetWriteDeadline(time.Now().Add(WriteTimeout))
	if _, err := p.conn.Write(p.buf); err != nil {
		p.conn.Close()
		p.conn = nil
		return err
	}
	return nil
}
