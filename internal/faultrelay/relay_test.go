package faultrelay

import (
	"bufio"
	"io"
	"net"
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
			go func() { io.Copy(c, c); c.Close() }()
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
