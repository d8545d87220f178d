// Package transport carries ring messages between servers over TCP, one
// persistent connection per peer, framed by package wire. Every
// connection opens with a handshake in which the dialler answers the
// listener's nonce with proof that it holds the cluster secret
// (wire.Proof); a connection without it is closed before any frame
// reaches the state machine. Sends are
// asynchronous so a slow or dead peer never stalls the election loop; a
// message that cannot be delivered is handed back as unreachable, which is
// how the state machine learns to skip a dead successor.
package transport

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringside/ringside/internal/accept"
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

// Dialer connects to a peer's address: TCP by default; tests pass an
// in-memory network's.
type Dialer func(ctx context.Context, addr string) (net.Conn, error)

// Transport is one server's endpoint.
type Transport struct {
	h      Handler
	dial   Dialer
	log    *slog.Logger
	secret string
	spin   time.Duration // SpinAfterElection's window
	queued atomic.Int32  // messages queued for the peers' goroutines

	mu     sync.Mutex
	addrs  map[ring.UID]string
	peers  map[ring.UID]*peer
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// New returns a transport that sends to peers, dialling with dial (nil:
// TCP), and serves the inbound connections handed to ServeConn (or
// accepted by Serve); secret is the cluster secret every member shares.
func New(secret string, dial Dialer, h Handler, log *slog.Logger) *Transport {
	if dial == nil {
		d := net.Dialer{}
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	return &Transport{h: h, dial: dial, log: log, secret: secret, addrs: map[ring.UID]string{}, peers: map[ring.UID]*peer{}, conns: map[net.Conn]struct{}{}}
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

// Send delivers m to m.To without blocking the caller on a slow or dead
// peer: it writes straight to an idle, established connection, and
// otherwise queues m for the peer's goroutine, which dials. An unknown peer
// or a full queue makes m unreachable at once.
func (t *Transport) Send(m ring.Message) {
	p := t.peer(m.To)
	if p == nil {
		t.h.Unreachable(m)
		return
	}
	if p.tryDirect(m) {
		return
	}
	t.mu.Lock()
	queued := false
	if !t.closed && t.peers[m.To] == p {
		p.hold(1)
		select {
		case p.queue <- m:
			queued = true
		default:
			p.hold(-1)
		}
	}
	t.mu.Unlock()
	if !queued {
		t.h.Unreachable(m)
	}
}

// peer returns the sender for u, starting it on first use; nil when u has
// no known address or the transport is closed.
func (t *Transport) peer(u ring.UID) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	if p := t.peers[u]; p != nil {
		return p
	}
	addr, ok := t.addrs[u]
	if !ok {
		return nil
	}
	p := &peer{t: t, addr: addr, queue: make(chan ring.Message, queueLen)}
	t.peers[u] = p
	t.wg.Add(1)
	go p.run()
	return p
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

// Serve accepts peer connections from ln until it is closed (waiting
// out a shortage of file descriptors).
func (t *Transport) Serve(ln net.Listener) error {
	return accept.Loop(ln, t.log, func(c net.Conn) { go t.ServeConn(c, nil) })
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
	c.SetDeadline(time.Now().Add(helloTimeout))
	err := t.challenge(c, r)
	c.SetDeadline(time.Time{})
	if err != nil {
		t.malformed(c, err)
		return
	}
	var sp *spinner
	if t.spin > 0 {
		sp = newSpinner(c, r, &t.queued)
	}
	var buf [wire.FrameSize]byte
	for {
		if sp != nil {
			sp.wait()
		}
		m, err := wire.Read(r, &buf)
		if err != nil {
			t.malformed(c, err)
			return
		}
		t.h.Deliver(m)
		if sp != nil && !m.Ack {
			switch m.Type {
			case ring.MsgElection:
				sp.arm(t.spin)
			case ring.MsgElected:
				sp.disarm()
			}
		}
	}
}

// challenge is the listener's side of the handshake: the dialler's
// hello, a fresh nonce back, and the dialler's proof for it.
func (t *Transport) challenge(c net.Conn, r io.Reader) error {
	if err := wire.ReadHello(r); err != nil {
		return err
	}
	nonce := wire.NewNonce()
	if _, err := c.Write(wire.AppendChallenge(nil, nonce)); err != nil {
		return err
	}
	return wire.ReadProof(r, wire.Proof(t.secret, nonce))
}

// answer is the dialler's side of the handshake on a new connection c:
// it sends the hello, reads the challenge within challengeTimeout, and
// returns the proof that must open its first write.
func (t *Transport) answer(c net.Conn) ([]byte, error) {
	c.SetDeadline(time.Now().Add(challengeTimeout))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(wire.AppendHello(nil)); err != nil {
		return nil, err
	}
	nonce, err := wire.ReadChallenge(c)
	if err != nil {
		return nil, err
	}
	return wire.AppendProof(nil, wire.Proof(t.secret, nonce)), nil
}

// challengeTimeout bounds the wait for a listener's nonce: a round trip
// once per connection, but one a loaded listener may be slow to answer —
// at WriteTimeout a busy live peer was taken for dead.
const challengeTimeout = 2 * time.Second

// helloTimeout bounds how long an inbound connection may hold a
// goroutine without proving it is a peer.
const helloTimeout = 5 * time.Second

// malformed logs and reports a connection closed for what it sent; a
// connection that merely ended is not reported.
func (t *Transport) malformed(c net.Conn, err error) {
	if !errors.Is(err, wire.ErrMalformed) && !errors.Is(err, wire.ErrNoSecret) {
		return
	}
	t.log.Warn("closing a peer connection", "remote", c.RemoteAddr(), "err", err)
	if t.h.Malformed != nil {
		t.h.Malformed(c.RemoteAddr().String(), err)
	}
}

// peer owns the outbound connection to one member. Messages go out in
// the order Send was called: directly when nothing is queued, else through
// the queue.
type peer struct {
	t       *Transport
	addr    string
	queue   chan ring.Message
	pending atomic.Int32 // queued or being written by run

	mu    sync.Mutex // guards the connection
	conn  net.Conn
	gone  chan struct{} // closed when the peer closes conn
	proof []byte        // conn is new: the next write opens with this proof
	buf   []byte
	// conn's write deadline, as last set
	deadline time.Time
}

// hold counts d more (or, negative, fewer) messages queued for run.
func (p *peer) hold(d int32) {
	p.pending.Add(d)
	p.t.queued.Add(d)
}

func (p *peer) tryDirect(m ring.Message) bool {
	if p.pending.Load() > 0 || !p.mu.TryLock() {
		return false
	}
	defer p.mu.Unlock()
	if p.pending.Load() > 0 || p.conn == nil {
		return false
	}
	select {
	case <-p.gone:
		return false // redialling is the peer goroutine's job
	default:
	}
	_, err := p.write(m)
	return err == nil
}

func (p *peer) run() {
	defer p.t.wg.Done()
	for m := range p.queue {
		p.mu.Lock()
		// A cached connection may be to a peer that restarted since;
		// one redial tells a stale connection from a dead peer. A dial
		// that failed already told: a dead peer stays in the ring until
		// it is removed, and every heartbeat's lease ask to it dialled
		// twice.
		dialed, err := p.write(m)
		if err != nil && !dialed {
			_, err = p.write(m)
		}
		p.hold(-1)
		p.mu.Unlock()
		if err != nil {
			p.t.h.Unreachable(m)
		}
	}
	p.mu.Lock()
	if p.conn != nil {
		p.conn.Close()
	}
	p.mu.Unlock()
}

// write sends one frame, dialling first if needed, and reports whether
// it dialled. p.mu must be held.
func (p *peer) write(m ring.Message) (dialed bool, err error) {
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
		dialed = true
		ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
		c, err := p.t.dial(ctx, p.addr)
		cancel()
		if err != nil {
			return true, err
		}
		proof, err := p.t.answer(c)
		if err != nil {
			c.Close()
			return true, err
		}
		p.conn, p.gone, p.proof, p.deadline = c, make(chan struct{}), proof, time.Time{}
		// Past the challenge peers never write on this connection, so a
		// read returns only when the peer's end closes — the earliest
		// sign that it died.
		go func(c net.Conn, gone chan struct{}) {
			io.Copy(io.Discard, c)
			close(gone)
		}(c, p.gone)
	}
	p.buf = append(p.buf[:0], p.proof...)
	p.buf = wire.Append(p.buf, m)
	if d, move := writeDeadline(time.Now(), p.deadline); move {
		p.deadline = d
		p.conn.SetWriteDeadline(d)
	}
	if _, err := p.conn.Write(p.buf); err != nil {
		p.conn.Close()
		p.conn = nil
		return dialed, err
	}
	p.proof = nil
	return dialed, nil
}

// writeDeadline returns the deadline of a write starting at now on a
// connection whose deadline is cur, and whether it moved. Moving it
// updates a runtime timer, on every hop's path before its write, so it
// moves only once less than half of WriteTimeout is left: a write is
// bounded by between WriteTimeout/2 and WriteTimeout.
func writeDeadline(now, cur time.Time) (time.Time, bool) {
	if cur.Sub(now) >= WriteTimeout/2 {
		return cur, false
	}
	return now.Add(WriteTimeout), true
}
