// Package memnet is an in-memory network for tests of servers that listen
// and dial: hosts are addresses, connections are buffered in-memory pipes
// with exact deadlines (pipe.go), and a test can cut two hosts apart and
// heal them — the way hashicorp/raft's InmemTransport lets raft be tested
// without sockets. No ports are taken, so nothing races for a free one.
//
// Why not the standard library's net.Pipe: it is synchronous, and two
// servers that each write to the other under a lock wait on each other
// until a write deadline declares the peer dead — a socket's buffer never
// does that. Why not gRPC's bufconn: a deadline set in the past and then
// cleared can still fire, which net/http's server reads as a client gone.
package memnet

import (
	"context"
	"fmt"
	"net"
	"sync"
)

// backlog is how many dialled connections wait for Accept, as a socket's
// listen backlog.
const backlog = 128

// Network is one in-memory network.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*listener
	cut       map[[2]string]bool
	conns     map[*conn]struct{}
}

// New returns an empty network.
func New() *Network {
	return &Network{listeners: map[string]*listener{}, cut: map[[2]string]bool{}, conns: map[*conn]struct{}{}}
}

// Host is the network as seen from addr: what it dials comes from addr,
// so a cut between addr and a peer applies.
func (n *Network) Host(addr string) *Host { return &Host{n: n, addr: addr} }

// Host is one address on a Network.
type Host struct {
	n    *Network
	addr string
}

// Listen binds addr (which must be the host's own address, as a socket
// binds an address the host has); it fails while another listener holds it.
func (h *Host) Listen(addr string) (net.Listener, error) {
	if addr != h.addr {
		return nil, fmt.Errorf("memnet: listen %s: not this host's address (%s)", addr, h.addr)
	}
	n := h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.listeners[addr]; ok {
		return nil, fmt.Errorf("memnet: listen %s: address already in use", addr)
	}
	l := &listener{n: n, addr: addr, conns: make(chan net.Conn, backlog), done: make(chan struct{})}
	n.listeners[addr] = l
	return l, nil
}

// DialContext connects to the listener at addr; it is refused when nobody
// listens there or the two hosts are cut apart.
func (h *Host) DialContext(ctx context.Context, addr string) (net.Conn, error) {
	n := h.n
	n.mu.Lock()
	l, ok := n.listeners[addr]
	cut := n.cut[pair(h.addr, addr)]
	n.mu.Unlock()
	if !ok || cut {
		return nil, &net.OpError{Op: "dial", Net: "memnet", Err: fmt.Errorf("connection refused (%s → %s)", h.addr, addr)}
	}
	if err := ctx.Err(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: "memnet", Err: err}
	}
	client, server := newPipeConn(h.addr, addr)
	if !l.queue(server) {
		return nil, &net.OpError{Op: "dial", Net: "memnet", Err: fmt.Errorf("connection refused (%s → %s)", h.addr, addr)}
	}
	mc := &conn{Conn: client, n: n, ends: pair(h.addr, addr)}
	n.mu.Lock()
	n.conns[mc] = struct{}{}
	n.mu.Unlock()
	return mc, nil
}

// Cut parts hosts a and b: dials between them are refused and the
// connections between them close, as when a partition resets them.
func (n *Network) Cut(a, b string) {
	n.mu.Lock()
	n.cut[pair(a, b)] = true
	var closing []*conn
	for c := range n.conns {
		if c.ends == pair(a, b) {
			closing = append(closing, c)
		}
	}
	n.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
}

// Heal undoes Cut.
func (n *Network) Heal(a, b string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.cut, pair(a, b))
}

func pair(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

type listener struct {
	n     *Network
	addr  string
	conns chan net.Conn
	done  chan struct{}

	mu     sync.Mutex
	closed bool
}

// queue hands c to Accept; false when the listener is closed or its
// backlog is full (a refused connection, as a full SYN queue drops one).
func (l *listener) queue(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	select {
	case l.conns <- c:
		return true
	default:
		return false
	}
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close frees the address for the next Listen (a restarted server) and
// closes the connections no Accept took.
func (l *listener) Close() error {
	l.n.mu.Lock()
	if l.n.listeners[l.addr] == l {
		delete(l.n.listeners, l.addr)
	}
	l.n.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	close(l.done)
	for {
		select {
		case c := <-l.conns:
			c.Close()
		default:
			return nil
		}
	}
}

func (l *listener) Addr() net.Addr { return addr(l.addr) }

// conn is the dialling end; closing it closes the accepted end's reads
// and writes too (pipeConn).
type conn struct {
	net.Conn
	n    *Network
	ends [2]string
}

func (c *conn) Close() error {
	c.n.mu.Lock()
	delete(c.n.conns, c)
	c.n.mu.Unlock()
	return c.Conn.Close()
}

type addr string

func (a addr) Network() string { return "memnet" }
func (a addr) String() string  { return string(a) }
