package balancer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
)

// bufferedFronts are the fronts that buffer whole messages, with their
// limits and timeouts set (zero: the default).
var bufferedFronts = map[string]func(b *Balancer, head, body int, header, idle time.Duration) frontServer{
	"fasthttp": func(b *Balancer, head, body int, header, idle time.Duration) frontServer {
		return &FastFront{B: b, HeadBytes: head, MaxBodyBytes: body, HeaderTimeout: header, IdleTimeout: idle}
	},
	"epoll": func(b *Balancer, head, body int, header, idle time.Duration) frontServer {
		return &EpollFront{B: b, HeadBytes: head, MaxBodyBytes: body, HeaderTimeout: header, IdleTimeout: idle}
	},
}

// serveBuffered serves b on a loopback front of the kind, returning its
// address.
func serveBuffered(t *testing.T, kind string, b *Balancer, head, body int, header, idle time.Duration) string {
	t.Helper()
	f := bufferedFronts[kind](b, head, body, header, idle)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go f.Serve(ln)
	t.Cleanup(func() { f.Shutdown(t.Context()) })
	return ln.Addr().String()
}

// The buffering fronts' limits are their memory per client: a head over
// HeadBytes gets 431, a body over MaxBodyBytes 413 (before any of it
// reaches a worker), a worker's answer over it 502 — the refusals of what
// the client sent with a closed connection — and the front keeps serving
// others.
func TestBufferedFrontLimits(t *testing.T) {
	for kind := range bufferedFronts {
		t.Run(kind, func(t *testing.T) { testBufferedFrontLimits(t, kind) })
	}
}

func testBufferedFrontLimits(t *testing.T, kind string) {
	var forwarded atomic.Int32
	w := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forwarded.Add(1)
		if r.URL.Path == "/huge" {
			io.WriteString(w, strings.Repeat("x", 4096))
			return
		}
		io.WriteString(w, "ok")
	}))
	defer w.Close()
	b, err := New(Options{Log: quiet})
	require.NoError(t, err)
	require.NoError(t, b.Update(Static([]string{addr(w)}, []float64{1})))
	front := serveBuffered(t, kind, b, 2048, 1024, 0, 0)
	for name, c := range map[string]struct {
		req  string
		want int
	}{
		"head over the limit": {"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("h", 4096) + "\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge},
		"body over the limit": {fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", 2000, strings.Repeat("b", 2000)), http.StatusRequestEntityTooLarge},
		"chunked body over the limit": {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n" + strings.Repeat("b", 2000) + "\r\n0\r\n\r\n",
			http.StatusRequestEntityTooLarge},
		"answer over the limit":     {"GET /huge HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusBadGateway},
		"content-length past int64": {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n", http.StatusBadRequest},
	} {
		t.Run(name, func(t *testing.T) {
			before := forwarded.Load()
			conn, err := net.Dial("tcp", front)
			require.NoError(t, err)
			defer conn.Close()
			go io.WriteString(conn, c.req)
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			assert.Equal(t, c.want, resp.StatusCode, string(body))
			if c.want == http.StatusBadGateway {
				return // the client's request was fine: its connection stays
			}
			assert.Equal(t, before, forwarded.Load(), "nothing reached the worker")
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = br.ReadByte()
			// EOF, or a reset where the front closed with the client's
			// bytes unread.
			assert.True(t, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET), "the connection is closed after the refusal: %v", err)
		})
	}
	code, _, body := get(t, &http.Client{}, http.MethodGet, "http://"+front+"/x", "")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body)
}

// fasthttp forwards request-targets net/http (the workers' parser)
// refuses and cuts fragments off; the fronts on its parser refuse both
// with 400 before anything reaches a worker (FuzzFrontRequestStream found
// each).
func TestBufferedFrontRefusesTargetsNetHTTPWouldNot(t *testing.T) {
	for kind := range bufferedFronts {
		t.Run(kind, func(t *testing.T) { testRefusesTargets(t, kind) })
	}
}

func testRefusesTargets(t *testing.T, kind string) {
	var forwarded atomic.Int32
	w := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { forwarded.Add(1) }))
	defer w.Close()
	b, err := New(Options{Log: quiet})
	require.NoError(t, err)
	require.NoError(t, b.Update(Static([]string{addr(w)}, []float64{1})))
	_, url := front(t, kind, b)
	for _, target := range []string{"/%", "/a%zz", "/a#b", "/#"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		require.NoError(t, err)
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", target)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, target)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, target)
		conn.Close()
	}
	assert.Zero(t, forwarded.Load(), "nothing reached the worker")
	code, _, _ := get(t, &http.Client{}, http.MethodGet, url+"/a%20b?q=%41", "")
	assert.Equal(t, http.StatusOK, code, "well-formed escapes pass")
}

// A client that trickles its head, or sends nothing, is cut off after the
// header and idle timeouts; the front keeps serving the others.
func TestBufferedFrontCutsSlowAndIdleClients(t *testing.T) {
	for kind := range bufferedFronts {
		t.Run(kind, func(t *testing.T) { testCutsSlowAndIdle(t, kind) })
	}
}

func testCutsSlowAndIdle(t *testing.T, kind string) {
	a := named("a")
	defer a.Close()
	b, err := New(Options{Log: quiet})
	require.NoError(t, err)
	require.NoError(t, b.Update(Static([]string{addr(a)}, []float64{1})))
	front := serveBuffered(t, kind, b, 0, 0, 300*time.Millisecond, 300*time.Millisecond)
	for name, first := range map[string]string{"idle": "", "slow head": "GET /x HTTP/1.1\r\nHost: x\r\nX-Slow: "} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("tcp", front)
			require.NoError(t, err)
			defer conn.Close()
			io.WriteString(conn, first)
			// Far longer than the timeouts: a front that waits for the
			// client fails here, not by hanging.
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = io.ReadAll(conn)
			var ne net.Error
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "the front still holds the connection after 10 s")
		})
	}
	code, _, _ := get(t, &http.Client{}, http.MethodGet, "http://"+front+"/x", "")
	assert.Equal(t, http.StatusOK, code)
}

// BenchmarkFastFrontRewrite is the fasthttp front's own work on a request
// and its answer besides the pick and the system calls: the checks and
// header rewrites of wrk's request (lb-proxy's) and of a worker's answer.
func BenchmarkFastFrontRewrite(b *testing.B) {
	var req fasthttp.Request
	require.NoError(b, req.Read(bufio.NewReader(strings.NewReader("GET /work?cost=0 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"))))
	var resp fasthttp.Response
	require.NoError(b, resp.Read(bufio.NewReader(strings.NewReader("HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nDate: Sun, 29 Nov 2026 10:00:00 GMT\r\nContent-Length: 2\r\n\r\nok"))))
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
	in := &ctx.Request
	var answer fasthttp.Response
	b.ReportAllocs()
	for b.Loop() {
		req.CopyTo(in)
		if status, msg := forwardable(&ctx.Request, ctx.RemoteAddr()); status != 0 {
			b.Fatal(msg)
		}
		resp.CopyTo(&answer)
		if responseHasHop(&answer.Header) {
			dropFastHopHeaders(&answer.Header)
		}
		answer.Header.ResetConnectionClose()
	}
}

// The client's address goes into X-Forwarded-For as net.IP prints it
// (IPv4 dotted, also when mapped into IPv6; no zone), after the ones a
// prior proxy put there, and hop-by-hop headers of any case are dropped.
func TestFastFrontForwardedFor(t *testing.T) {
	for _, a := range []*net.TCPAddr{
		{IP: net.IPv4(10, 1, 2, 3), Port: 1},
		{IP: net.IP{10, 1, 2, 3}, Port: 1},
		{IP: net.ParseIP("2001:db8::1"), Port: 1, Zone: "eth0"},
		{IP: net.ParseIP("::ffff:192.0.2.1"), Port: 1},
	} {
		for _, prior := range []string{"", "X-Forwarded-For: 198.51.100.7\r\n"} {
			var req fasthttp.Request
			require.NoError(t, req.Read(bufio.NewReader(strings.NewReader("GET /a%2Fb?x=%3F HTTP/1.1\r\nHost: h\r\ncOnNeCtIoN: x-secret\r\nX-Secret: s\r\nkeep-alive: 5\r\n"+prior+"\r\n"))))
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, a, nil)
			status, msg := forwardable(&ctx.Request, ctx.RemoteAddr())
			require.Zero(t, status, msg)
			want := a.IP.String()
			if prior != "" {
				want = "198.51.100.7, " + want
			}
			assert.Equal(t, want, string(ctx.Request.Header.Peek("X-Forwarded-For")), "%v", a)
			for _, h := range []string{"Connection", "X-Secret", "Keep-Alive"} {
				assert.Empty(t, ctx.Request.Header.Peek(h), h)
			}
			assert.Equal(t, "/a%2Fb?x=%3F", string(ctx.Request.Header.RequestURI()), "the target goes on as sent")
		}
	}
}
