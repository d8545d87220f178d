package serve

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUntilServesThenShutsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	srv := &http.Server{Addr: addr, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })}
	go func() { done <- Until(ctx, time.Second, srv) }()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	cancel()
	assert.NoError(t, <-done)
	_, err = http.Get("http://" + addr)
	assert.Error(t, err, "shut down")
}

func TestUntilReportsAnAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	ok := &http.Server{Addr: "127.0.0.1:0"}
	err = Until(context.Background(), time.Second, ok, &http.Server{Addr: ln.Addr().String()})
	assert.ErrorContains(t, err, "address already in use")
}

func TestExitCode(t *testing.T) {
	var b strings.Builder
	assert.Equal(t, 0, exitCode(&b, "d", nil))
	assert.Equal(t, 0, exitCode(&b, "d", flag.ErrHelp))
	assert.Equal(t, 0, exitCode(&b, "d", fmt.Errorf("run: %w", context.Canceled)))
	assert.Empty(t, b.String())
	assert.Equal(t, 1, exitCode(&b, "d", errors.New(`environment X="y": bad`)))
	assert.Equal(t, "d: environment X=\"y\": bad\n", b.String())
}

func TestLoggerRejectsAnUnknownLevel(t *testing.T) {
	_, err := Logger("loud")
	assert.ErrorContains(t, err, `log-level "loud"`)
	l, err := Logger("warn")
	require.NoError(t, err)
	assert.False(t, l.Enabled(context.Background(), slog.LevelInfo))
}
