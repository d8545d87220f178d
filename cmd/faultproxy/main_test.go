package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/internal/fdtest"
)

func TestMain(m *testing.M) {
	fdtest.RunChild(main)
	os.Exit(m.Run())
}

func TestBadFlagsAreRefusedByName(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--target", "127.0.0.1:1"}, "--delay 0s"},
		{[]string{"--target", "127.0.0.1:1", "--delay", "-1s"}, "--delay -1s"},
		{[]string{"--target", "127.0.0.1:1", "--delay", "2m"}, "--delay 2m0s"},
		{[]string{"--target", "no-port", "--delay", "1s"}, `--target "no-port"`},
		{[]string{"--delay", "1s"}, "KUBERNETES_SERVICE_HOST"},
		{[]string{"--target", "127.0.0.1:1", "--delay", "1s", "--listen", "127.0.0.1:99999"}, "listen 127.0.0.1:99999"},
		{[]string{"--target", "127.0.0.1:1", "--delay", "1s", "--log-level", "loud"}, `log-level "loud"`},
	} {
		err := run(context.Background(), c.args)
		require.Error(t, err, "%v", c.args)
		assert.Contains(t, err.Error(), c.want, "%v", c.args)
	}
}

// A bad value in the environment is refused as a bad flag is, naming the
// variable's flag.
func TestBadEnvIsRefused(t *testing.T) {
	t.Setenv("FAULTPROXY_DELAY", "soon")
	err := run(context.Background(), []string{"--target", "127.0.0.1:1"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "soon")
}

// Flooded with more connections than it may open files (each costs two:
// the client's and the server's side), the relay keeps its process and
// relays again once the flood has gone.
func TestOutlivesAConnectionFlood(t *testing.T) {
	target := echoServer(t)
	addr := fdtest.FreeAddr(t)
	p := fdtest.Start(t, 32, nil, "--listen", addr, "--target", target, "--delay", "1s", "--log-level", "error")
	require.Eventually(t, func() bool { _, err := roundTrip(addr); return err == nil }, 30*time.Second, 20*time.Millisecond, "the relay relays")
	var flood []net.Conn
	for range 64 {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			flood = append(flood, c)
		}
	}
	for _, c := range flood {
		c.Close()
	}
	assert.Eventually(t, func() bool { _, err := roundTrip(addr); return err == nil }, 30*time.Second, 50*time.Millisecond, "relays again after the flood")
	assert.False(t, p.Exited(), "the relay outlived running out of descriptors")
}

// roundTrip sends a line through the relay on a new connection.
func roundTrip(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("x\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

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

// SIGUSR1 holds what the client sends for --delay; SIGUSR2 lifts it; the
// connection survives both.
func TestSignalsTurnTheDelayOnAndOff(t *testing.T) {
	addr := fdtest.FreeAddr(t)
	const delay = 400 * time.Millisecond
	p := fdtest.Start(t, 64, nil, "--listen", addr, "--target", echoServer(t), "--delay", delay.String(), "--log-level", "error")

	var c net.Conn
	var err error
	require.Eventually(t, func() bool {
		c, err = net.Dial("tcp", addr)
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the relay listens")
	defer c.Close()
	rd := bufio.NewReader(c)
	roundTrip := func() time.Duration {
		start := time.Now()
		_, err := c.Write([]byte("x\n"))
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "x\n", line)
		return time.Since(start)
	}
	roundTrip()

	p.Signal(syscall.SIGUSR1)
	held := false
	for deadline := time.Now().Add(30 * time.Second); !held && time.Now().Before(deadline); {
		held = roundTrip() >= delay
	}
	assert.True(t, held, "after SIGUSR1 a round trip takes at least the delay")

	p.Signal(syscall.SIGUSR2)
	fast := false
	for deadline := time.Now().Add(30 * time.Second); !fast && time.Now().Before(deadline); {
		fast = roundTrip() < delay
	}
	assert.True(t, fast, "after SIGUSR2 a round trip is quicker than the delay again")
	assert.False(t, p.Exited(), "the signals do not end the relay")
}
