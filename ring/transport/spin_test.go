package transport

import (
	"bufio"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/ring"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	server = <-accepted
	require.NotNil(t, server)
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// returns runs f and fails unless it returns within d.
func returns(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still waiting after %v", d)
	}
}

// A polling reader stops as soon as bytes arrive, long before its window
// ends, and leaves them for the read.
func TestSpinnerStopsAtTheFirstByte(t *testing.T) {
	client, server := tcpPair(t)
	r := bufio.NewReader(server)
	sp := newSpinner(server, r, new(atomic.Int32))
	require.NotNil(t, sp, "a TCP connection read through bufio can be polled")
	sp.arm(time.Hour)
	written := make(chan struct{})
	go func() {
		client.Write([]byte("x"))
		close(written)
	}()
	returns(t, 10*time.Second, sp.wait)
	<-written
	b, err := r.ReadByte()
	require.NoError(t, err)
	assert.Equal(t, byte('x'), b, "the poll consumed nothing")
}

// Nothing comes: the poll ends with its window, and at once when the
// window was ended (an ELECTED), a message waits for a peer's goroutine or
// the peer hung up.
func TestSpinnerEndsWithItsWindowOrTheConnection(t *testing.T) {
	client, server := tcpPair(t)
	var queued atomic.Int32
	sp := newSpinner(server, bufio.NewReader(server), &queued)
	require.NotNil(t, sp)
	sp.arm(20 * time.Millisecond)
	returns(t, 10*time.Second, sp.wait)

	sp.arm(time.Hour)
	sp.disarm()
	returns(t, 10*time.Second, sp.wait)

	sp.arm(time.Hour)
	queued.Store(1)
	returns(t, 10*time.Second, sp.wait)
	queued.Store(0)

	sp.arm(time.Hour)
	client.Close()
	returns(t, 10*time.Second, sp.wait)
}

// Only a socket read through the bufio reader ServeConn uses is polled:
// an in-memory pipe falls back to the plain read.
func TestSpinnerNeedsASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	assert.Nil(t, newSpinner(a, bufio.NewReader(a), new(atomic.Int32)))
	_, server := tcpPair(t)
	assert.Nil(t, newSpinner(server, server, new(atomic.Int32)), "not a bufio reader")
}

// With polling on, a connection still delivers every frame in order:
// ELECTION (which starts a window), its acknowledgement, lease frames and
// the ELECTED that ends it.
func TestSpinningConnectionDeliversInOrder(t *testing.T) {
	sa, sb := newSink(), newSink()
	a := listen(t, sa.handler())
	defer a.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := New(testSecret, nil, sb.handler(), a.log)
	b.SpinAfterElection(time.Hour)
	assert.Equal(t, MaxSpin, b.spin, "the window is cut to MaxSpin")
	go b.Serve(ln)
	defer func() { ln.Close(); b.Close() }()

	ua, ub := ring.UIDOf(a.Addr().String()), ring.UIDOf(ln.Addr().String())
	a.SetPeers(map[ring.UID]string{ub: ln.Addr().String()})
	sent := []ring.Message{
		{Type: ring.MsgElection, From: ua, To: ub, Cand: ua, Round: 1},
		{Type: ring.MsgElection, Ack: true, From: ua, To: ub, Cand: ua, Round: 1},
		{Type: ring.MsgHeartbeat, From: ua, To: ub, Cand: ua, Round: 1},
		{Type: ring.MsgElected, From: ua, To: ub, Cand: ua, Round: 1},
		{Type: ring.MsgElection, From: ua, To: ub, Cand: ua, Round: 2},
		{Type: ring.MsgElected, From: ua, To: ub, Cand: ua, Round: 2},
	}
	for _, m := range sent {
		a.Send(m)
	}
	for i, m := range sent {
		got := recv(t, sb.in)
		assert.Equal(t, m.Type, got.Type, "frame %d", i)
		assert.Equal(t, m.Ack, got.Ack, "frame %d", i)
		assert.Equal(t, m.Round, got.Round, "frame %d", i)
	}
}
