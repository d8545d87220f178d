package accept

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// accepted runs Accept on ln in the background.
func accepted(ln net.Listener) chan net.Conn {
	got := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(got)
			return
		}
		got <- c
	}()
	return got
}

func dial(t *testing.T, ln net.Listener) {
	t.Helper()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
}

func within(t *testing.T, got chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-got:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still waits")
		return nil
	}
}

// stillWaits fails if got delivers within 50 ms (a blocked Accept never
// returns early, so a slow machine cannot fail it falsely).
func stillWaits(t *testing.T, got chan net.Conn, msg string) {
	t.Helper()
	select {
	case <-got:
		t.Fatal(msg)
	case <-time.After(50 * time.Millisecond):
	}
}

// Past the bound Accept waits until a connection closes — a second Close
// of the same connection frees no second place — and a Close of the
// listener ends the wait.
func TestBoundHoldsAtMostNConnections(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := bound(raw, 2)
	for range 4 {
		dial(t, ln)
	}
	a, b := within(t, accepted(ln)), within(t, accepted(ln))

	third := accepted(ln)
	stillWaits(t, third, "a third connection was accepted past a bound of two")
	require.NoError(t, a.Close())
	c := within(t, third)
	assert.Error(t, a.Close(), "closed twice")

	fourth := accepted(ln)
	stillWaits(t, fourth, "a second Close of one connection freed a second place")
	require.NoError(t, ln.Close())
	_, open := <-fourth
	assert.False(t, open, "Accept ends with the listener")
	_, err = ln.Accept()
	assert.True(t, errors.Is(err, net.ErrClosed), "%v", err)
	b.Close()
	c.Close()
}

// A socket accepted through the bound keeps its descriptor reachable.
func TestBoundKeepsTheSocket(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	dial(t, ln)
	c := within(t, accepted(ln))
	defer c.Close()
	sc, ok := c.(syscall.Conn)
	require.True(t, ok, "%T hides its socket", c)
	raw, err := sc.SyscallConn()
	require.NoError(t, err)
	var fd uintptr
	require.NoError(t, raw.Control(func(f uintptr) { fd = f }))
	assert.NotZero(t, fd)
}

// failing accepts with EMFILE a number of times, then from the listener.
type failing struct {
	net.Listener
	left int
}

func (f *failing) Accept() (net.Conn, error) {
	if f.left > 0 {
		f.left--
		return nil, syscall.EMFILE
	}
	return f.Listener.Accept()
}

// An Accept that fails (out of descriptors) gives its place back: more
// failures than the bound leave the listener accepting, and Loop waits
// them out.
func TestBoundGivesThePlaceBackOnAFailedAccept(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := bound(&failing{Listener: raw, left: 3}, 1)
	defer ln.Close()
	dial(t, ln)
	got := make(chan net.Conn, 1)
	go Loop(ln, nil, func(c net.Conn) { got <- c })
	within(t, got).Close()
}
