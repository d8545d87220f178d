package podfault

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const secret = "0123456789abcdef-secret"

type fakeRoutes struct {
	mu sync.Mutex
	on map[netip.Addr]bool
}

func (f *fakeRoutes) Blackhole(ip netip.Addr, on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		f.on[ip] = true
	} else {
		delete(f.on, ip)
	}
	return nil
}

func (f *fakeRoutes) cut() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for ip := range f.on {
		out = append(out, ip.String())
	}
	return out
}

// newAgent supervises a shell that writes its join list to a file and
// sleeps: a server that only runs.
func newAgent(t *testing.T, router Router) (*Agent, *httptest.Server, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "join")
	a, err := New(Config{Bin: "/bin/sh", Args: []string{"-c", `echo "$RINGNODE_JOIN" > ` + out + `; exec sleep 600`},
		JoinEnv: "RINGNODE_JOIN", Secret: secret, Router: router})
	require.NoError(t, err)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() { srv.Close(); a.Stop() })
	return a, srv, out
}

func post(t *testing.T, srv *httptest.Server, path, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, nil)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set(HeaderSecret, key)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func (a *Agent) pid() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil {
		return 0
	}
	return a.cmd.Process.Pid
}

// Start hands the join list over, a second start is refused while the
// server runs, kill answers once it is dead, and a restart runs it again.
func TestStartKillRestart(t *testing.T) {
	a, srv, out := newAgent(t, nil)
	code, body := post(t, srv, "/start?join=10.0.0.1:7000,10.0.0.2:7000", secret)
	require.Equal(t, http.StatusOK, code, body)
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(out)
		return string(b) == "10.0.0.1:7000,10.0.0.2:7000\n"
	}, 10*time.Second, 10*time.Millisecond, "the server got its seeds")
	code, body = post(t, srv, "/start", secret)
	assert.Equal(t, http.StatusConflict, code, body)
	pid := a.pid()
	require.NotZero(t, pid)
	code, body = post(t, srv, "/kill", secret)
	require.Equal(t, http.StatusOK, code, body)
	assert.Zero(t, a.pid(), "dead when kill answers")
	code, body = post(t, srv, "/kill", secret)
	assert.Equal(t, http.StatusConflict, code, body)
	code, body = post(t, srv, "/start", secret)
	require.Equal(t, http.StatusOK, code, body)
	assert.NotEqual(t, pid, a.pid())
}

// A pause stops the server's process and thaws it when it ends.
func TestPauseFreezesThenThaws(t *testing.T) {
	a, srv, _ := newAgent(t, nil)
	code, body := post(t, srv, "/pause?for=1s", secret)
	assert.Equal(t, http.StatusConflict, code, "no server: "+body)
	require.Equal(t, http.StatusOK, first(post(t, srv, "/start", secret)))
	pid := a.pid()
	require.Eventually(t, func() bool { return procState(pid) == "S" }, 10*time.Second, 10*time.Millisecond)
	code, body = post(t, srv, "/pause?for=300ms", secret)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "T", procState(pid), "frozen when pause answers")
	require.Eventually(t, func() bool { return procState(pid) == "S" }, 10*time.Second, 10*time.Millisecond, "thawed")
	// A killed paused server dies all the same.
	require.Equal(t, http.StatusOK, first(post(t, srv, "/pause?for=1m", secret)))
	require.Equal(t, http.StatusOK, first(post(t, srv, "/kill", secret)))
}

// A cut sets the routes after its answer and removes them when it ends;
// one shared by two cuts stays until the second ends.
func TestCutHealsItself(t *testing.T) {
	r := &fakeRoutes{on: map[netip.Addr]bool{}}
	_, srv, _ := newAgent(t, r)
	require.Equal(t, http.StatusOK, first(post(t, srv, "/cut?ips=10.0.0.1,10.0.0.2&for=200ms", secret)))
	require.Equal(t, http.StatusOK, first(post(t, srv, "/cut?ips=10.0.0.2&for=2s", secret)))
	require.Eventually(t, func() bool { return len(r.cut()) == 2 }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return len(r.cut()) == 1 }, 10*time.Second, 10*time.Millisecond, "the first cut healed")
	assert.Equal(t, []string{"10.0.0.2"}, r.cut(), "the second still holds its route")
	require.Eventually(t, func() bool { return len(r.cut()) == 0 }, 10*time.Second, 10*time.Millisecond)
}

func first(code int, _ string) int { return code }

// Hostile requests: no or a wrong secret, malformed or dangerous
// addresses, durations out of range, too many addresses, a cut without
// the right to make it.
func TestRefusesBadRequests(t *testing.T) {
	r := &fakeRoutes{on: map[netip.Addr]bool{}}
	_, srv, _ := newAgent(t, r)
	many := strings.TrimSuffix(strings.Repeat("10.0.0.1,", maxList+1), ",")
	for _, c := range []struct {
		path, key string
		code      int
		says      string
	}{
		{"/start", "", http.StatusForbidden, HeaderSecret},
		{"/kill", "wrong-secret-0123456789", http.StatusForbidden, HeaderSecret},
		{"/start?join=10.0.0.1", secret, http.StatusBadRequest, "join"},
		{"/start?join=10.0.0.1:0", secret, http.StatusBadRequest, "port 0"},
		{"/start?join=host:7000", secret, http.StatusBadRequest, "join"},
		{"/cut?ips=127.0.0.1&for=1s", secret, http.StatusBadRequest, "unicast"},
		{"/cut?ips=0.0.0.0&for=1s", secret, http.StatusBadRequest, "unicast"},
		{"/cut?ips=224.0.0.1&for=1s", secret, http.StatusBadRequest, "unicast"},
		{"/cut?ips=fe80::1%25eth0&for=1s", secret, http.StatusBadRequest, "unicast"},
		{"/cut?ips=&for=1s", secret, http.StatusBadRequest, "no address"},
		{"/cut?ips=" + many + "&for=1s", secret, http.StatusBadRequest, "at most"},
		{"/cut?ips=10.0.0.1&for=0s", secret, http.StatusBadRequest, "for"},
		{"/cut?ips=10.0.0.1&for=6m", secret, http.StatusBadRequest, "at most"},
		{"/cut?ips=10.0.0.1&for=-1s", secret, http.StatusBadRequest, "for"},
		{"/cut?ips=10.0.0.1&for=9999999999h", secret, http.StatusBadRequest, "for"},
		{"/pause?for=soon", secret, http.StatusBadRequest, "for"},
	} {
		code, body := post(t, srv, c.path, c.key)
		assert.Equal(t, c.code, code, "%s: %s", c.path, body)
		assert.Contains(t, body, c.says, c.path)
	}
	assert.Empty(t, r.cut(), "no refused request set a route")
	_, noRouter, _ := newAgent(t, nil)
	code, body := post(t, noRouter, "/cut?ips=10.0.0.1&for=1s", secret)
	assert.Equal(t, http.StatusNotImplemented, code)
	assert.Contains(t, body, "CAP_NET_ADMIN")
	_, err := New(Config{Secret: "short"})
	assert.ErrorContains(t, err, "16 characters")
}
