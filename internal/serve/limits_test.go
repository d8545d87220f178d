package serve

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A client that trickles its body, or leaves its connection idle, is cut
// off by a server Limit gave its bounds; a well-behaved one is served.
func TestLimitCutsSlowAndIdleClients(t *testing.T) {
	old := [3]time.Duration{ReadHeaderTimeout, ReadTimeout, IdleTimeout}
	ReadHeaderTimeout, ReadTimeout, IdleTimeout = 200*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	t.Cleanup(func() { ReadHeaderTimeout, ReadTimeout, IdleTimeout = old[0], old[1], old[2] })
	srv := Limit(&http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			return
		}
		io.WriteString(w, strings.Repeat("x", int(n)))
	})})
	assert.Equal(t, WriteTimeout, srv.WriteTimeout)
	assert.Equal(t, MaxHeaderBytes, srv.MaxHeaderBytes)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go srv.Serve(ln)
	defer srv.Close()

	// closed waits until the server closes c (a read returns), at most a
	// generous bound: without the limits it would never close it.
	closed := func(c net.Conn, what string) {
		t.Helper()
		done := make(chan struct{})
		go func() { io.Copy(io.Discard, c); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the server kept the connection", what)
		}
	}

	// A body promised and trickled a byte at a time.
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	closed(c, "trickled body")
	close(stop)

	// A head that never ends.
	c2, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c2.Close()
	io.WriteString(c2, "GET / HTTP/1.1\r\nHost: x\r\n")
	closed(c2, "unfinished head")

	// A request served, then the connection left idle.
	c3, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c3.Close()
	io.WriteString(c3, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
	resp, err := http.ReadResponse(bufio.NewReader(c3), nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	closed(c3, "idle keep-alive")
}
