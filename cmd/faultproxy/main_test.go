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
	} {
		err := run(context.Background(), c.args)
		require.Error(t, err, "%v", c.args)
		assert.Contains(t, err.Error(), c.want, "%v", c.args)
	}
}

// SIGUSR1 holds what the client sends for --delay; SIGUSR2 lifts it; the
// connection survives both.
func TestSignalsTurnTheDelayOnAndOff(t *testing.T) {
	echoLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer echoLn.Close()
	go func() {
		for {
			c, err := echoLn.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	addr := fdtest.FreeAddr(t)
	const delay = 400 * time.Millisecond
	p := fdtest.Start(t, 64, nil, "--listen", addr, "--target", echoLn.Addr().String(), "--delay", delay.String(), "--log-level", "error")

	var c net.Conn
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
