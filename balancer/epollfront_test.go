package balancer

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/balancer/pick"
	"github.com/ringside/ringside/internal/loadreport"
)

// rawWorker is a worker that speaks through script, one call per
// connection, for the answers net/http's server never gives.
func rawWorker(t *testing.T, script func(c net.Conn, br *bufio.Reader)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				script(c, bufio.NewReader(c))
			}()
		}
	}()
	return ln.Addr().String()
}

func epollFront(t *testing.T, b *Balancer, f *EpollFront) string {
	t.Helper()
	f.B = b
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- f.Serve(ln) }()
	t.Cleanup(func() {
		f.Shutdown(context.Background())
		assert.ErrorIs(t, <-served, http.ErrServerClosed)
	})
	return ln.Addr().String()
}

func balancerFor(t *testing.T, addrs ...string) *Balancer {
	t.Helper()
	b, err := New(Options{Log: quiet})
	require.NoError(t, err)
	w := make([]float64, len(addrs))
	for i := range w {
		w[i] = 1
	}
	require.NoError(t, b.Update(Static(addrs, w)))
	return b
}

// Answers net/http's server does not give: a 103 before the answer, a
// body that ends with the connection, a 204; each reaches the client as
// a well-framed answer, and the front's connection to the worker is
// reused only where the worker kept it.
func TestEpollFrontFramesWorkersAnswers(t *testing.T) {
	for name, c := range map[string]struct{ answer, want string }{
		"early hints":     {"HTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal", "final"},
		"close-delimited": {"HTTP/1.0 200 OK\r\n\r\nto the end", "to the end"},
		"no content":      {"HTTP/1.1 204 No Content\r\n\r\n", ""},
		"chunked":         {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n", "abcde"},
	} {
		t.Run(name, func(t *testing.T) {
			w := rawWorker(t, func(conn net.Conn, br *bufio.Reader) {
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(conn, c.answer)
			})
			addr := epollFront(t, balancerFor(t, w), &EpollFront{})
			code, _, body := get(t, &http.Client{}, http.MethodGet, "http://"+addr+"/x", "")
			assert.Less(t, code, 300)
			assert.Equal(t, c.want, body)
		})
	}
}

// A client that asks for 100 Continue gets it before it sends its body,
// and then the answer.
func TestEpollFrontContinues(t *testing.T) {
	a := named("a")
	defer a.Close()
	addr := epollFront(t, balancerFor(t, strings.TrimPrefix(a.URL, "http://")), &EpollFront{})
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(conn, "POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
	br := bufio.NewReader(conn)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "HTTP/1.1 100 Continue\r\n", line)
	_, err = br.ReadString('\n')
	require.NoError(t, err)
	io.WriteString(conn, "body")
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, "a POST body", string(body))
}

// A pooled connection its worker closed meanwhile (the request reaches it
// and the worker hangs up) costs an idempotent request nothing: it goes
// again on a new connection, and the worker is not charged. A request that
// may not be sent twice gets 502.
func TestEpollFrontRetriesAStalePooledConnection(t *testing.T) {
	w := rawWorker(t, func(conn net.Conn, br *bufio.Reader) {
		// One answer per connection; the next request finds it closed.
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		http.ReadRequest(br)
	})
	b := balancerFor(t, w)
	addr := epollFront(t, b, &EpollFront{Loops: 1})
	hc := &http.Client{}
	for range 5 {
		code, _, body := get(t, hc, http.MethodGet, "http://"+addr+"/x", "")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "ok", body)
	}
	assert.Zero(t, b.Tally("").Workers[0].Failures, "a stale connection is not the worker's failure")
	code, _, _ := get(t, hc, http.MethodPost, "http://"+addr+"/x", "once")
	assert.Equal(t, http.StatusBadGateway, code, "a POST is not sent twice")
}

// A client that leaves while its request is in flight: the answer is
// dropped, nothing stays counted in flight, and the worker's connection
// serves the next request.
func TestEpollFrontOutlivesAClientThatLeaves(t *testing.T) {
	release := make(chan struct{})
	w := rawWorker(t, func(conn net.Conn, br *bufio.Reader) {
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			<-release
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	b := balancerFor(t, w)
	f := &EpollFront{Loops: 1}
	addr := epollFront(t, b, f)
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	fmt.Fprint(conn, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
	require.Eventually(t, func() bool { return b.Tally("").Workers[0].Active == 1 }, 5*time.Second, 5*time.Millisecond)
	conn.Close()
	// A client's end reads like a half-close until the answer is written
	// to it: the front holds it till then.
	close(release)
	require.Eventually(t, func() bool { return b.Tally("").Workers[0].Active == 0 && f.clients.Load() == 0 }, 5*time.Second, 5*time.Millisecond)
	code, _, body := get(t, &http.Client{}, http.MethodGet, "http://"+addr+"/x", "")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body)
	assert.EqualValues(t, 1, f.Connections(w), "the worker's connection was reused")
}

// Shutdown with a request that never ends waits until its context does,
// then closes everything; Serve returns.
func TestEpollFrontShutdownForced(t *testing.T) {
	w := rawWorker(t, func(conn net.Conn, br *bufio.Reader) {
		http.ReadRequest(br)
		io.Copy(io.Discard, br) // never answers
	})
	b := balancerFor(t, w)
	f := &EpollFront{}
	addr := epollFront(t, b, f)
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	fmt.Fprint(conn, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
	require.Eventually(t, func() bool { return b.Tally("").Workers[0].Active == 1 }, 5*time.Second, 5*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, f.Shutdown(ctx), context.DeadlineExceeded)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the client's connection is closed")
	assert.Zero(t, b.Tally("").Workers[0].Active, "the request cut off is counted done")
	assert.Zero(t, f.Connections(w))
}

// Out of file descriptors, the loop stops accepting for a while and goes
// on serving the connections it has; once descriptors free up it accepts
// again. The soft limit is lowered for the test, so that running out
// takes a few connections.
func TestEpollFrontOutlastsEMFILE(t *testing.T) {
	a := named("a")
	defer a.Close()
	var logged syncBuffer
	b, err := New(Options{Log: slog.New(slog.NewTextHandler(&logged, nil))})
	require.NoError(t, err)
	require.NoError(t, b.Update(Static([]string{strings.TrimPrefix(a.URL, "http://")}, []float64{1})))
	addr := epollFront(t, b, &EpollFront{Loops: 1})
	// A kept-alive client whose request left a pooled connection to the
	// worker: it needs no new descriptor to be served.
	kept := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	code, _, _ := get(t, kept, http.MethodGet, "http://"+addr+"/x", "")
	require.Equal(t, http.StatusOK, code)

	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	open, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	low := lim
	low.Cur = uint64(len(open)) + 16
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low))
	restored := false
	restore := func() {
		if !restored {
			restored = true
			syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		}
	}
	defer restore()
	// Each connection costs this process two descriptors (the client's
	// and the front's), so the front runs out before the dials do; the
	// dials go on until they do too.
	var held []net.Conn
	for range 64 {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		held = append(held, c)
	}
	require.NotEmpty(t, held)
	require.Eventually(t, func() bool { return strings.Contains(logged.String(), "accept failed; retrying") }, 5*time.Second, 5*time.Millisecond,
		"the front ran out of descriptors")
	code, _, _ = get(t, kept, http.MethodGet, "http://"+addr+"/x", "")
	assert.Equal(t, http.StatusOK, code, "the kept client is served while the front is out of descriptors")
	for _, c := range held {
		c.Close()
	}
	restore()
	code, _, _ = get(t, &http.Client{}, http.MethodGet, "http://"+addr+"/x", "")
	assert.Equal(t, http.StatusOK, code, "accepting again")
}

// syncBuffer is a log's destination that tests read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// An answer passed on verbatim still feeds its load report to the picker:
// with wrr-reports, the worker that reports a hundred times the capacity
// gets nearly every request once the reports are in. And a client that
// asks to close gets Connection: close on the verbatim answer, its body
// whole.
func TestEpollFrontVerbatimAnswers(t *testing.T) {
	worker := func(name, report string) string {
		w := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(loadreport.Header, report)
			fmt.Fprint(w, name)
		}))
		t.Cleanup(w.Close)
		return addr(w)
	}
	big := worker("big", "TEXT cpu_utilization=0.01, rps_fractional=100")
	small := worker("small", "TEXT cpu_utilization=1, rps_fractional=1")
	b, err := New(Options{Algorithm: pick.LoadReportWRR, Log: quiet, Tuning: pick.Tuning{Blackout: time.Nanosecond, Period: time.Millisecond}})
	require.NoError(t, err)
	require.NoError(t, b.Update(Static([]string{big, small}, []float64{1, 1})))
	url := "http://" + epollFront(t, b, &EpollFront{}) + "/"

	deadline := time.Now().Add(20 * time.Second)
	for {
		counts := map[string]int{}
		for range 40 {
			resp, err := http.Get(url)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.NotEmpty(t, resp.Header.Get(loadreport.Header), "the answer keeps its headers")
			counts[string(body)]++
		}
		if counts["big"] >= 36 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the reports never weighed the picks: %v", counts)
	}

	conn, err := net.Dial("tcp", strings.TrimPrefix(url[:len(url)-1], "http://"))
	require.NoError(t, err)
	defer conn.Close()
	br := bufio.NewReader(conn)
	fmt.Fprint(conn, "GET /a HTTP/1.1\r\nHost: front\r\n\r\nGET /b HTTP/1.1\r\nHost: front\r\nConnection: close\r\n\r\n")
	for i := range 2 {
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Contains(t, []string{"big", "small"}, string(body))
		assert.Equal(t, i == 1, resp.Close, "Connection: close on the second answer only")
	}
	assertClosed(t, conn, br)
}

// A worker whose answer cannot be framed strictly gets its client a 502,
// never its bytes passed on verbatim, and the front goes on serving: a
// folded line, a control character, a bare CR, a name that is no token,
// both lengths, a length twice, one past int64, one over the body limit.
func TestEpollFrontRefusesHostileAnswers(t *testing.T) {
	answers := []string{
		"HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX-A: a\x01b\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX A: 1\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 9437184\r\n\r\nok",
	}
	var next sync.Mutex
	i := 0
	w := rawWorker(t, func(conn net.Conn, br *bufio.Reader) {
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			next.Lock()
			a := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
			if i < len(answers) {
				a = answers[i]
			}
			i++
			next.Unlock()
			io.WriteString(conn, a)
		}
	})
	addr := epollFront(t, balancerFor(t, w), &EpollFront{Loops: 1})
	hc := &http.Client{}
	for _, a := range answers {
		code, _, body := get(t, hc, http.MethodPost, "http://"+addr+"/x", "once")
		assert.Equal(t, http.StatusBadGateway, code, "%q answered %q", a, body)
	}
	code, _, body := get(t, hc, http.MethodGet, "http://"+addr+"/x", "")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body, "the front serves on")
}

// Each loop holds its processor, also while it waits (epollWait): the
// front leaves one more to the rest of the program — timers, the admin
// server, the collector's workers — which would otherwise run only when
// the runtime's monitor preempts a loop.
func TestEpollFrontLeavesAProcessorToTheRest(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) }) // after the front's own cleanup: they run last first
	w := rawWorker(t, func(conn net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err == nil {
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	addr := epollFront(t, balancerFor(t, w), &EpollFront{Loops: before})
	code, _, body := get(t, &http.Client{}, http.MethodGet, "http://"+addr+"/x", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", body)
	assert.GreaterOrEqual(t, runtime.GOMAXPROCS(0), before+1, "%d loops", before)
}
