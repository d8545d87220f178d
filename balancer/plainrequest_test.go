package balancer

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// builderLoop is what the request builders of an epoll loop use, without
// its epoll instance.
func builderLoop() *eloop {
	return &eloop{headMax: 1024, bodyMax: 4096, br: bufio.NewReaderSize(nil, 1024+4096), bw: bufio.NewWriterSize(nil, 4096)}
}

var testRemotes = []net.Addr{
	nil, // a Unix socket: no X-Forwarded-For
	&net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 40000},
	&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 40000, Zone: "eth0"},
}

// readRequest reads one request as a worker's net/http reads it, body
// included.
func readRequest(t testing.TB, wire []byte) (*http.Request, []byte) {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(wire))
	skipEmptyLines(br)
	req, err := http.ReadRequest(br)
	require.NoError(t, err, "%q", wire)
	body, err := io.ReadAll(req.Body)
	require.NoError(t, err, "%q", wire)
	require.Zero(t, br.Buffered(), "bytes after the request in %q", wire)
	return req, body
}

// checkPlain holds a request that framer.plain lets through to what the
// worker must get: what the client sent, header for header and in order,
// with X-Forwarded-For (from a TCP client), -Host and -Proto added; and to
// what the parsed path makes of it, where that path takes it too.
func checkPlain(t testing.TB, msg []byte, remote net.Addr) {
	fr := framer{headMax: 1024, bodyMax: 4096}
	n, ferr := fr.scan(msg, true)
	if ferr != nil || n != len(msg) || !fr.plain(msg) {
		return
	}
	l := builderLoop()
	c := &client{l: l, remote: remote, fr: fr}
	var plain, parsed exchange
	status, why := c.plainRequest(&plain, msg)
	pstatus, pwhy := c.parsedRequest(&parsed, msg)
	if status != 0 {
		if pstatus != status {
			t.Fatalf("the plain path refused %q with %d %s, the parsed path with %d %s", msg, status, why, pstatus, pwhy)
		}
		return
	}
	want, wantBody := readRequest(t, msg)
	got, gotBody := readRequest(t, plain.wire)
	if got.Method != want.Method || got.RequestURI != want.RequestURI || got.Proto != want.Proto || got.Host != want.Host || !bytes.Equal(gotBody, wantBody) {
		t.Fatalf("the worker got %s %s %s host %q body %q; the client sent %s %s %s host %q body %q",
			got.Method, got.RequestURI, got.Proto, got.Host, gotBody, want.Method, want.RequestURI, want.Proto, want.Host, wantBody)
	}
	added := http.Header{"X-Forwarded-Host": {want.Host}, "X-Forwarded-Proto": {"http"}}
	if a, ok := remote.(*net.TCPAddr); ok {
		added.Set("X-Forwarded-For", string(appendClientIP(nil, a)))
	}
	expect := want.Header.Clone()
	for k, v := range added {
		if _, ok := expect[k]; ok {
			t.Fatalf("framer.plain let %s through in %q", k, msg)
		}
		expect[k] = v
	}
	for k, v := range got.Header {
		if !slices.Equal(v, expect[k]) {
			t.Fatalf("header %s: the worker got %q, want %q (client sent %q)", k, v, expect[k], msg)
		}
	}
	if len(got.Header) != len(expect) {
		t.Fatalf("the worker got headers %v, want %v", got.Header, expect)
	}
	wantHead, wantIdem := want.Method == http.MethodHead, want.Method == http.MethodGet || want.Method == http.MethodHead || want.Method == http.MethodOptions || want.Header.Get("Idempotency-Key") != ""
	if plain.head != wantHead || plain.idempotent != wantIdem || !plain.http11 || plain.closeAfter {
		t.Fatalf("%q: head %v idempotent %v http11 %v closeAfter %v", msg, plain.head, plain.idempotent, plain.http11, plain.closeAfter)
	}
	if pstatus != 0 {
		return // fasthttp refused it: the plain path is held to net/http's reading above
	}
	alt, altBody := readRequest(t, parsed.wire)
	if alt.Method != got.Method || alt.RequestURI != got.RequestURI || alt.Host != got.Host || !bytes.Equal(altBody, gotBody) ||
		parsed.head != plain.head || parsed.idempotent != plain.idempotent || parsed.closeAfter != plain.closeAfter {
		t.Fatalf("%q: the parsed path makes %s %s host %q body %q head %v idempotent %v, the plain one %s %s host %q body %q head %v idempotent %v",
			msg, alt.Method, alt.RequestURI, alt.Host, altBody, parsed.head, parsed.idempotent, got.Method, got.RequestURI, got.Host, gotBody, plain.head, plain.idempotent)
	}
}

func TestPlainRequests(t *testing.T) {
	for _, tc := range []struct {
		msg   string
		plain bool
	}{
		{"GET /work?cost=0 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n", true},
		{"\r\nPOST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nIdempotency-Key: k\r\n\r\nabc", true},
		{"HEAD /a%2Fb HTTP/1.1\r\nhost: [2001:db8::1]:80\r\nCookie: a=1\r\nCookie: b=2\r\nX-A: 1\r\nx-a: 2\r\nX-Obs: \xe9t\xe9\r\n\r\n", true},
		{"PUT /p HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", true},
		{"GET / HTTP/1.1\r\nHost:\r\n\r\n", true},
		{"GET / HTTP/1.1\r\nHost: \t\r\nX-Empty:\r\n\r\n", true},
		{"GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n", true}, // plain, then refused by checkTarget
		{"GET / HTTP/1.0\r\nHost: x\r\n\r\n", false},
		{"GET / HTTP/1.1\r\n\r\n", false},
		{"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", false},
		{"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", false},
		{"GET / HTTP/1.1\nHost: x\r\n\r\n", false},
		{"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false},
		{"GET / HTTP/1.1\r\nHost: x\r\nkeep-alive: 5\r\n\r\n", false},
		{"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n", false},
		{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
		{"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\na", false},
		{"GET / HTTP/1.1\r\nHost: x\r\nx-forwarded-for: 198.51.100.7\r\n\r\n", false},
		{"GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n", false},
		{"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", false},
		{"G@T / HTTP/1.1\r\nHost: x\r\n\r\n", false},
	} {
		fr := framer{headMax: 1024, bodyMax: 4096}
		n, err := fr.scan([]byte(tc.msg), true)
		require.Nil(t, err, tc.msg)
		require.Equal(t, len(tc.msg), n, tc.msg)
		assert.Equal(t, tc.plain, fr.plain([]byte(tc.msg)), tc.msg)
		for _, r := range testRemotes {
			checkPlain(t, []byte(tc.msg), r)
		}
	}
}

// The target check holds on the plain path: a bad escape is refused as
// the parsed path refuses it.
func TestPlainRequestRefusesATargetNetHTTPWouldNot(t *testing.T) {
	msg := []byte("GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n")
	fr := framer{headMax: 1024, bodyMax: 4096}
	_, ferr := fr.scan(msg, true)
	require.Nil(t, ferr)
	c := &client{l: builderLoop(), fr: fr}
	status, why := c.plainRequest(&exchange{}, msg)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, why, "invalid URL escape")
}

// Any request framer.plain lets through reaches the worker as the client
// sent it plus the X-Forwarded-* headers (checkPlain), from every kind of
// client address.
func FuzzPlainRequest(f *testing.F) {
	for _, s := range []string{
		"GET /work?cost=0 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
		"\r\nPOST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nIdempotency-Key: k\r\n\r\nabc",
		"HEAD /a%2Fb HTTP/1.1\r\nhost: [::1]:80\r\nCookie: a=1\r\nCookie: b=2\r\nX-A: 1\r\nx-a: 2\r\n\r\n",
		"OPTIONS /x?#y HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nUser-Agent: u\r\n\r\n",
	} {
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, msg []byte, remote uint8) {
		checkPlain(t, msg, testRemotes[int(remote)%len(testRemotes)])
	})
}

// The plain path is the front's own work on wrk's request (lb-proxy's)
// besides the pick and the system calls; BenchmarkParsedRequest is the
// path every request took before it.
func BenchmarkPlainRequest(b *testing.B) { benchRequest(b, (*client).plainRequest) }

func BenchmarkParsedRequest(b *testing.B) { benchRequest(b, (*client).parsedRequest) }

func benchRequest(b *testing.B, build func(*client, *exchange, []byte) (int, string)) {
	msg := []byte("GET /work?cost=0 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")
	c := &client{l: builderLoop(), remote: testRemotes[1], fr: framer{headMax: 1024, bodyMax: 4096}}
	var x exchange
	b.ReportAllocs()
	for b.Loop() {
		c.fr.reset()
		if n, err := c.fr.scan(msg, false); n != len(msg) || err != nil || !c.fr.plain(msg) {
			b.Fatal("not framed as a plain request")
		}
		if status, why := build(c, &x, msg); status != 0 {
			b.Fatal(why)
		}
	}
}
