package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFlagsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--name", "a"}, "--peers (APP_PEERS) is required"},
		{[]string{"--name", "a", "--peers", "a"}, "want name=URL"},
		{[]string{"--name", "a", "--peers", "a=ftp://x"}, "not an http(s) URL"},
		{[]string{"--name", "a", "--peers", "a=http://x,a=http://y"}, "a twice"},
		{[]string{"--name", "a", "--peers", "b=http://x"}, "do not include this replica"},
		{[]string{"--name", "a", "--peers", "a=http://x", "--secret", "short"}, "at least 16"},
		{[]string{"--name", "a", "--peers", "a=http://x", "--secret", "0123456789abcdef", "--write-work", "-1"}, "must not be negative"},
		{[]string{"--peers", "a=http://x", "--secret", "0123456789abcdef"}, "needs a name"},
		{[]string{"--name", "a", "--peers", "a=http://x", "--secret", "0123456789abcdef", "--stale", "-1s"}, "must not be negative"},
		{[]string{"--name", "a", "--peers", "a=http://x", "--secret", "0123456789abcdef", "--poll", "1s", "--stale", "100ms"}, "shorter than the poll"},
	} {
		err := run(context.Background(), tc.args)
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, err.Error(), tc.want, "%v", tc.args)
	}
}

func TestMalformedEnvironmentIsAnError(t *testing.T) {
	t.Setenv("APP_WRITE_WORK", "lots")
	err := run(context.Background(), []string{"--name", "a"})
	require.ErrorContains(t, err, "APP_WRITE_WORK")
}

// Whatever --peers holds, an accepted list names each replica once with an
// http(s) URL, and reads back the same when written out again.
func FuzzParsePeers(f *testing.F) {
	for _, s := range []string{"a=http://x:1,b=https://y/", "a=http://x,a=http://y", "a=http://x//", "=http://x", "a=", "a=http://", ",,a=http://h,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parsePeers(s)
		if err != nil {
			return
		}
		var parts []string
		for name, u := range m {
			require.NotEmpty(t, name)
			require.Regexp(t, `^https?://`, u)
			parts = append(parts, name+"="+u)
		}
		again, err := parsePeers(strings.Join(parts, ","))
		require.NoError(t, err)
		require.Equal(t, m, again)
	})
}

// A replica serves on a listening socket it inherits, so whoever starts
// the replicas can fix every address first.
func TestServesAnInheritedListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f, err := ln.(*net.TCPListener).File()
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--name", "a", "--peers", "a=http://" + addr, "--secret", "0123456789abcdef",
			"--sidecar", "http://127.0.0.1:1", "--listen-fd", strconv.Itoa(int(f.Fd())), "--log-level", "error"})
	}()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/role")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"leaderless"`)
	}, 5*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	require.ErrorContains(t, run(context.Background(), []string{"--name", "a", "--peers", "a=http://x", "--secret", "0123456789abcdef", "--listen-fd", "999"}), "--listen-fd 999")
}
