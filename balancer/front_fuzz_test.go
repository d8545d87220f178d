package balancer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// recorder is a worker that parses what the front forwards with net/http's
// own reader and records every request; anything it cannot parse as a
// request where one must start is a framing error — the front smuggled.
type recorder struct {
	ln   net.Listener
	mu   sync.Mutex
	seen []*http.Request
	bad  error
}

func newRecorder(t testing.TB) *recorder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.serve(c)
		}
	}()
	return r
}

func (r *recorder) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.ErrUnexpectedEOF) {
				r.mu.Lock()
				r.bad = errors.Join(r.bad, err)
				r.mu.Unlock()
			}
			return
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return // the front gave up on a body its client never finished
		}
		r.mu.Lock()
		r.seen = append(r.seen, req)
		r.mu.Unlock()
		if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")); err != nil {
			return
		}
	}
}

func (r *recorder) take() ([]*http.Request, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen, bad := r.seen, r.bad
	r.seen, r.bad = nil, nil
	return seen, bad
}

// reference parses stream as a server would: the requests, in order, up
// to the first that is malformed or whose body is cut short. Empty lines
// before a request-line are skipped, as RFC 9112 §2.2 asks of a server
// (fasthttp does; net/http's ReadRequest alone does not).
func reference(stream []byte) []*http.Request {
	br := bufio.NewReader(bytes.NewReader(stream))
	var out []*http.Request
	for {
		skipEmptyLines(br)
		req, err := http.ReadRequest(br)
		if err != nil {
			return out
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return out
		}
		out = append(out, req)
	}
}

// skipEmptyLines drops the empty lines (CRLF or a bare LF) before a
// request-line.
func skipEmptyLines(br *bufio.Reader) {
	for {
		b, _ := br.Peek(2)
		switch {
		case len(b) >= 1 && b[0] == '\n':
			br.Discard(1)
		case len(b) == 2 && b[0] == '\r' && b[1] == '\n':
			br.Discard(2)
		default:
			return
		}
	}
}

// Any byte stream a client sends the front: the front answers and closes
// in bounded time; the worker receives only well-framed requests, each one
// a server parsing the client's stream would also have seen, in the same
// order (no request smuggled in a body or behind an ambiguous length), and
// none carries a hop-by-hop header.
func FuzzFrontRequestStream(f *testing.F) {
	for _, s := range []string{
		"GET /a HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 40\r\n\r\nabcGET /smuggled HTTP/1.1\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\nshort",
		"GET / HTTP/1.1\r\nHost: x\r\nConnection: X-Hop, close\r\nX-Hop: 1\r\nProxy-Authorization: p\r\nTe: trailers\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
		"NOT HTTP\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	rec := newRecorder(f)
	defer rec.ln.Close()
	b, err := New(Options{Log: quiet})
	if err != nil {
		f.Fatal(err)
	}
	if err := b.Update(Static([]string{rec.ln.Addr().String()}, []float64{1})); err != nil {
		f.Fatal(err)
	}
	// Clients come over a Unix socket: a TCP connection per input would
	// leave the loopback's ports in TIME_WAIT within seconds.
	// Every front gets every input.
	var socks []string
	for _, front := range []frontServer{
		&Front{B: b, HeaderTimeout: 2 * time.Second, IdleTimeout: 2 * time.Second},
		&FastFront{B: b, HeaderTimeout: 2 * time.Second, IdleTimeout: 2 * time.Second},
		&EpollFront{B: b, HeaderTimeout: 2 * time.Second, IdleTimeout: 2 * time.Second},
	} {
		ln, err := net.Listen("unix", filepath.Join(f.TempDir(), fmt.Sprintf("front%d.sock", len(socks))))
		if err != nil {
			f.Fatal(err)
		}
		go front.Serve(ln)
		defer front.Shutdown(f.Context())
		socks = append(socks, ln.Addr().String())
	}

	f.Fuzz(func(t *testing.T, stream []byte) {
		for _, sock := range socks {
			checkFront(t, sock, stream, rec)
		}
	})
}

func checkFront(t *testing.T, sock string, stream []byte, rec *recorder) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		c.Write(stream)
		c.(*net.UnixConn).CloseWrite()
	}()
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("the front did not answer and close: %v", err)
	}
	seen, bad := rec.take()
	if bad != nil {
		t.Fatalf("the worker received a malformed stream: %v", bad)
	}
	want := reference(stream)
	if len(seen) > len(want) {
		t.Fatalf("the worker saw %d requests, a server parsing the client's stream %d", len(seen), len(want))
	}
	for i, r := range seen {
		if r.Method != want[i].Method || r.URL.RequestURI() != want[i].URL.RequestURI() {
			t.Fatalf("request %d: the worker saw %s %s, the client sent %s %s", i, r.Method, r.URL.RequestURI(), want[i].Method, want[i].URL.RequestURI())
		}
		for _, h := range []string{"Proxy-Connection", "Keep-Alive", "Proxy-Authorization", "Te", "Trailer", "Upgrade"} {
			if v := r.Header.Get(h); v != "" {
				t.Fatalf("request %d forwarded the hop-by-hop %s: %q", i, h, v)
			}
		}
		for _, name := range want[i].Header.Values("Connection") {
			for _, h := range bytes.Split([]byte(name), []byte(",")) {
				if h := string(bytes.TrimSpace(h)); h != "" && http.CanonicalHeaderKey(h) != "Close" && r.Header.Get(h) != "" {
					t.Fatalf("request %d forwarded %s, which its Connection header names", i, h)
				}
			}
		}
	}
}
