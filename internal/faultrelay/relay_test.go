package faultrelay

import (
	"bufio"
	"io"
	"net"
	"os"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Through a buffer, not spliced: the descriptor test below
			// counts this process's descriptors, the echo server's too.
			go func() { io.CopyBuffer(struct{ io.Writer }{c}, struct{ io.Reader }{c}, nil); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func echo(c net.Conn, msg string) (string, error) {
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	return bufio.NewReader(c).ReadString('\n')
}

// The proxy relays; Cut drops the connections it holds and closes new
// ones until lifted; Delay holds what the client sends at least that long.
func TestRelayCutsAndDelays(t *testing.T) {
	p, err := New("127.0.0.1:0", echoServer(t))
	require.NoError(t, err)
	defer p.Close()

	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	got, err := echo(c, "hello")
	require.NoError(t, err)
	assert.Equal(t, "hello\n", got)

	p.Cut(true)
	_, err = echo(c, "lost")
	assert.Error(t, err, "a held connection is dropped")
	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	_, err = echo(c2, "refused")
	assert.Error(t, err, "a new connection is closed at once")

	p.Cut(false)
	c3, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c3.Close()
	got, err = echo(c3, "again")
	require.NoError(t, err)
	assert.Equal(t, "again\n", got)

	p.Delay(150 * time.Millisecond)
	start := time.Now()
	got, err = echo(c3, "late")
	require.NoError(t, err)
	assert.Equal(t, "late\n", got)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
}

// Relayed connections leave no descriptor behind once they are closed. A
// relay that spliced (io.Copy between two TCP connections) kept a pipe pair
// per copy in Go's pool until a garbage collection, and under a low
// descriptor limit an idle relay could then no longer dial its target
// (cmd/faultproxy's TestOutlivesAConnectionFlood).
func TestClosedConnectionsLeaveNoDescriptors(t *testing.T) {
	// No collection may close pooled pipes behind the test's back.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	p, err := New("127.0.0.1:0", echoServer(t))
	require.NoError(t, err)
	defer p.Close()
	before := openDescriptors(t)
	for range 16 {
		c, err := net.Dial("tcp", p.Addr())
		require.NoError(t, err)
		got, err := echo(c, "x")
		require.NoError(t, err)
		require.Equal(t, "x\n", got)
		c.Close()
	}
	assert.Eventually(t, func() bool { return openDescriptors(t) <= before }, 10*time.Second, 10*time.Millisecond,
		"descriptors before: %d, now: %d", before, openDescriptors(t))
}

func openDescriptors(t *testing.T) int {
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(fds)
}
