package balancer

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// frontServer is what the tests need of a front.
type frontServer interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
}

// fronts are the balancer's fronts; every front test runs on each.
var fronts = map[string]func(*Balancer) frontServer{
	"conn":     func(b *Balancer) frontServer { return &Front{B: b} },
	"fasthttp": func(b *Balancer) frontServer { return &FastFront{B: b} },
	"epoll":    func(b *Balancer) frontServer { return &EpollFront{B: b} },
}

func eachFront(t *testing.T, test func(t *testing.T, kind string)) {
	for kind := range fronts {
		t.Run(kind, func(t *testing.T) { test(t, kind) })
	}
}

// pooled reports whether front f keeps connections to the worker at addr.
func pooled(f frontServer, addr string) bool {
	var ok bool
	switch f := f.(type) {
	case *Front:
		_, ok = f.pools.Load(addr)
	case *FastFront:
		_, ok = f.clients.Load(addr)
	case *EpollFront:
		ok = f.Connections(addr) > 0
	}
	return ok
}

// front serves b on a loopback front of the kind for the test.
func front(t *testing.T, kind string, b *Balancer) (frontServer, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := fronts[kind](b)
	go f.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.Shutdown(ctx)
	})
	return f, "http://" + ln.Addr().String()
}

// assertClosed checks that the front closed conn after its last answer.
func assertClosed(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := br.ReadByte()
	assert.ErrorIs(t, err, io.EOF, "closed after Connection: close")
}

func get(t *testing.T, c *http.Client, method, url, body string, h ...string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	for i := 0; i+1 < len(h); i += 2 {
		req.Header.Set(h[i], h[i+1])
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// The front proxies like the ServeHTTP path: weights followed, requests
// and bodies forwarded, idempotent requests retried past a dead worker,
// a body-carrying one not; 503 with no table, 502 when every try failed.
func TestFrontProxies(t *testing.T) {
	eachFront(t, func(t *testing.T, kind string) {
		a, c := named("a"), named("c")
		defer a.Close()
		defer c.Close()
		b, err := New(Options{Log: quiet})
		require.NoError(t, err)
		_, url := front(t, kind, b)
		hc := &http.Client{}
		code, _, body := get(t, hc, http.MethodGet, url+"/x", "")
		assert.Equal(t, http.StatusServiceUnavailable, code)
		assert.Contains(t, body, "no worker")
		// A client that asks to close gets its connection closed, the
		// refusal too.
		conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		require.NoError(t, err)
		defer conn.Close()
		fmt.Fprint(conn, "GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assertClosed(t, conn, br)

		require.NoError(t, b.Update(Static([]string{addr(a), addr(c)}, []float64{3, 1})))
		n := map[string]int{}
		for range 1000 {
			code, _, body := get(t, hc, http.MethodGet, url+"/x", "")
			require.Equal(t, http.StatusOK, code)
			n[body[:1]]++
		}
		assert.InDelta(t, 750, n["a"], 60)
		_, _, body = get(t, hc, http.MethodPost, url+"/x", "payload")
		assert.True(t, strings.HasSuffix(body, "POST payload"), body)
		code, h, body := get(t, hc, http.MethodHead, url+"/x", "")
		assert.Equal(t, http.StatusOK, code)
		assert.Empty(t, body)
		assert.NotEmpty(t, h.Get("Content-Length"))
		r := b.Tally("")
		assert.Zero(t, r.Workers[0].Active+r.Workers[1].Active, "nothing left in flight")

		dead := named("dead")
		deadAddr := addr(dead)
		dead.Close()
		m := Static([]string{deadAddr, addr(a)}, []float64{99, 1})
		m.Seq = 2
		require.NoError(t, b.Update(m))
		for range 20 {
			code, _, body := get(t, hc, http.MethodGet, url+"/x", "")
			require.Equal(t, http.StatusOK, code)
			assert.True(t, strings.HasPrefix(body, "a"))
		}
		failed := 0
		for range 20 {
			if code, _, body := get(t, hc, http.MethodPost, url+"/x", "payload"); code == http.StatusBadGateway {
				assert.Contains(t, body, "worker w0")
				failed++
			}
		}
		assert.Greater(t, failed, 10, "a POST with a body is not replayed")
	})
}

// Hop-by-hop headers stay on their hop, the client's address is passed on
// in X-Forwarded-For, chunked bodies stream both ways, and a client that
// says Connection: close gets its connection closed.
func TestFrontHeadersAndFraming(t *testing.T) {
	eachFront(t, func(t *testing.T, kind string) {
		var seen http.Header
		w := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = r.Header.Clone()
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Keep-Alive", "timeout=5")
			w.Header().Set("X-Echo-Len", fmt.Sprint(len(body)))
			for i := range 3 {
				fmt.Fprintf(w, "part%d;", i)
				w.(http.Flusher).Flush() // chunked
			}
		}))
		defer w.Close()
		b, err := New(Options{Log: quiet})
		require.NoError(t, err)
		require.NoError(t, b.Update(Static([]string{addr(w)}, []float64{1})))
		_, url := front(t, kind, b)

		conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		require.NoError(t, err)
		defer conn.Close()
		br := bufio.NewReader(conn)
		fmt.Fprintf(conn, "POST /x HTTP/1.1\r\nHost: front\r\nConnection: X-Secret\r\nX-Secret: s\r\nProxy-Authorization: p\r\nX-Forwarded-For: 10.1.1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		assert.Equal(t, "part0;part1;part2;", string(body))
		assert.Equal(t, "7", resp.Header.Get("X-Echo-Len"), "the chunked request body arrived whole")
		assert.Empty(t, resp.Header.Get("Keep-Alive"), "the worker's hop-by-hop header stayed behind")
		assert.Empty(t, seen.Get("X-Secret"), "a header named in Connection is hop-by-hop")
		assert.Empty(t, seen.Get("Proxy-Authorization"))
		assert.Equal(t, "10.1.1.1, 127.0.0.1", seen.Get("X-Forwarded-For"))
		assert.Equal(t, "front", seen.Get("X-Forwarded-Host"))

		// Two pipelined requests, the second asking to close.
		fmt.Fprintf(conn, "GET /a HTTP/1.1\r\nHost: front\r\n\r\nGET /b HTTP/1.1\r\nHost: front\r\nConnection: close\r\n\r\n")
		for range 2 {
			resp, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
		}
		assertClosed(t, conn, br)
	})
}

// Garbage gets 400 and a closed connection; an upgrade gets 501; the
// front keeps serving others.
func TestFrontRefusesMalformedRequests(t *testing.T) {
	eachFront(t, func(t *testing.T, kind string) {
		a := named("a")
		defer a.Close()
		b, err := New(Options{Log: quiet})
		require.NoError(t, err)
		require.NoError(t, b.Update(Static([]string{addr(a)}, []float64{1})))
		_, url := front(t, kind, b)
		for req, want := range map[string]int{
			"NOT HTTP AT ALL\r\n\r\n":                                                        http.StatusBadRequest,
			"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n":                        http.StatusBadRequest,
			"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n": http.StatusNotImplemented,
		} {
			conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
			require.NoError(t, err)
			fmt.Fprint(conn, req)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err, req)
			assert.Equal(t, want, resp.StatusCode, req)
			conn.Close()
		}
		code, _, _ := get(t, &http.Client{}, http.MethodGet, url+"/x", "")
		assert.Equal(t, http.StatusOK, code)
	})
}

// Shutdown closes idle connections, lets a request in flight finish, and
// refuses new connections.
func TestFrontShutdown(t *testing.T) {
	eachFront(t, func(t *testing.T, kind string) {
		release := make(chan struct{})
		var once sync.Once
		free := func() { once.Do(func() { close(release) }) }
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-release
			io.WriteString(w, "done")
		}))
		defer slow.Close()
		defer free() // before Close, which waits for the request, if the test fails early
		b, err := New(Options{Log: quiet})
		require.NoError(t, err)
		require.NoError(t, b.Update(Static([]string{addr(slow)}, []float64{1})))
		f, url := front(t, kind, b)
		got := make(chan string, 1)
		go func() {
			_, _, body := get(t, &http.Client{}, http.MethodGet, url+"/x", "")
			got <- body
		}()
		require.Eventually(t, func() bool { return b.Tally("").Workers[0].Active == 1 }, 5*time.Second, 5*time.Millisecond)
		stopped := make(chan error, 1)
		go func() { stopped <- f.Shutdown(context.Background()) }()
		// Draining has begun once the listener refuses; the request is still
		// in flight, so Shutdown must still be waiting.
		require.Eventually(t, func() bool {
			c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), time.Second)
			if err == nil {
				c.Close()
			}
			return err != nil
		}, 5*time.Second, 5*time.Millisecond, "no longer accepting")
		select {
		case err := <-stopped:
			t.Fatalf("Shutdown returned (%v) with a request in flight", err)
		default:
		}
		free()
		assert.Equal(t, "done", <-got, "the request in flight finished")
		require.NoError(t, <-stopped)
	})
}

// A worker that leaves the table keeps no connections here: once a request
// after the change is done, its pooled connections are closed (the worker
// sees them go) and its pool is gone.
func TestFrontDropsDepartedWorkersPools(t *testing.T) {
	eachFront(t, func(t *testing.T, kind string) {
		var mu sync.Mutex
		open := map[net.Conn]bool{}
		gone := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "gone") }))
		gone.Config.ConnState = func(c net.Conn, s http.ConnState) {
			mu.Lock()
			defer mu.Unlock()
			switch s {
			case http.StateNew:
				open[c] = true
			case http.StateClosed, http.StateHijacked:
				delete(open, c)
			}
		}
		gone.Start()
		stays := named("stays")
		defer gone.Close()
		defer stays.Close()
		b, err := New(Options{Log: quiet})
		require.NoError(t, err)
		f, url := front(t, kind, b)
		require.NoError(t, b.Update(Static([]string{addr(gone)}, []float64{1})))
		hc := &http.Client{}
		for range 5 {
			code, _, _ := get(t, hc, http.MethodGet, url+"/x", "")
			require.Equal(t, http.StatusOK, code)
		}
		require.True(t, pooled(f, addr(gone)))
		m := Static([]string{addr(stays)}, []float64{1})
		m.Seq = 2
		require.NoError(t, b.Update(m))
		code, _, body := get(t, hc, http.MethodGet, url+"/x", "")
		require.Equal(t, http.StatusOK, code)
		require.True(t, strings.HasPrefix(body, "s"), body)
		// The epoll front's other loops find the change at their next tick.
		require.Eventually(t, func() bool { return !pooled(f, addr(gone)) }, 10*time.Second, 5*time.Millisecond,
			"the departed worker's pool is dropped")
		require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(open) == 0 },
			10*time.Second, 5*time.Millisecond, "the departed worker's connections are closed")
	})
}
