package balancer

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/internal/loadreport"
)

// frameAll frames the message at the start of stream, fed in pieces of
// the given size (0: whole), the end of input told with the last.
func frameAll(f framer, stream []byte, piece int) (int, *frameError) {
	if piece <= 0 {
		piece = len(stream)
	}
	for end := piece; ; end += piece {
		end = min(end, len(stream))
		n, err := f.scan(stream[:end], end == len(stream))
		if n > 0 || err != nil || end == len(stream) {
			return n, err
		}
	}
}

func reqFramer() framer { return framer{headMax: 1024, bodyMax: 4096} }

func TestFramerRequests(t *testing.T) {
	for stream, want := range map[string]int{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /next":                                                len("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"\r\n\nGET / HTTP/1.1\nHost: x\n\n":                                                         len("\r\n\nGET / HTTP/1.1\nHost: x\n\n"),
		"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcdef":                                        len("POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"),
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: 1\r\n\r\nGET": len("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: 1\r\n\r\n"),
		"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc":                                          0, // incomplete
	} {
		for _, piece := range []int{0, 1, 2, 7} {
			n, err := frameAll(reqFramer(), []byte(stream), piece)
			if want == 0 {
				assert.Nil(t, err, "%q", stream)
				assert.Zero(t, n, "%q", stream)
				continue
			}
			assert.Nil(t, err, "%q in pieces of %d", stream, piece)
			assert.Equal(t, want, n, "%q in pieces of %d", stream, piece)
		}
	}
}

func TestFramerRefuses(t *testing.T) {
	for stream, status := range map[string]int{
		"GET / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n":                  http.StatusBadRequest,
		"GET / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc":                        http.StatusBadRequest,
		"GET / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n":                                 http.StatusNotImplemented,
		"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n":                              http.StatusBadRequest,
		"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n":                                               http.StatusBadRequest,
		"GET / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n":                             http.StatusBadRequest,
		"GET / HTTP/1.1\r\nContent-Length: 5000\r\n\r\n":                                             http.StatusRequestEntityTooLarge,
		"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n":                                                          http.StatusBadRequest,
		"GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n":                                                       http.StatusBadRequest,
		"GET / HTTP/1.1\r\nX : a\r\n\r\n":                                                            http.StatusBadRequest,
		"GET / HTTP/2.0\r\n\r\n":                                                                     http.StatusBadRequest,
		"GET /\r\n\r\n":                                                                              http.StatusBadRequest,
		"GET / HTTP/1.1\r\nX: " + strings.Repeat("a", 2000) + "\r\n\r\n":                             http.StatusRequestHeaderFieldsTooLarge,
		strings.Repeat("\r\n", 600) + "GET / HTTP/1.1\r\n\r\n":                                       http.StatusRequestHeaderFieldsTooLarge,
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n":                   http.StatusBadRequest,
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n":                         http.StatusBadRequest,
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n":                                http.StatusBadRequest,
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1001\r\n":                              http.StatusRequestEntityTooLarge,
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("1\r\nx\r\n", 2000): http.StatusRequestEntityTooLarge,
	} {
		for _, piece := range []int{0, 3} {
			n, err := frameAll(reqFramer(), []byte(stream), piece)
			if assert.NotNil(t, err, "%.60q in pieces of %d: framed %d", stream, piece, n) {
				assert.Equal(t, status, err.status, "%.60q: %s", stream, err.msg)
			}
		}
	}
}

func TestFramerResponses(t *testing.T) {
	type answer struct {
		head    bool
		stream  string
		want    int
		interim bool
	}
	for _, a := range []answer{
		{false, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP", len("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), false},
		{true, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", len("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"), false},
		{false, "HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\n", len("HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\n"), false},
		{false, "HTTP/1.1 304 Not Modified\r\n\r\n", len("HTTP/1.1 304 Not Modified\r\n\r\n"), false},
		{false, "HTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\nHTTP/1.1 200 OK\r\n", len("HTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n"), true},
		{false, "HTTP/1.0 200 OK\r\n\r\nuntil the end", len("HTTP/1.0 200 OK\r\n\r\nuntil the end"), false},
		{false, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", len("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"), false},
	} {
		f := framer{response: true, toHEAD: a.head, headMax: 1024, bodyMax: 4096}
		n, err := frameAll(f, []byte(a.stream), 0)
		assert.Nil(t, err, a.stream)
		assert.Equal(t, a.want, n, a.stream)
		f = framer{response: true, toHEAD: a.head, headMax: 1024, bodyMax: 4096}
		f.scan([]byte(a.stream), true)
		assert.Equal(t, a.interim, f.interim, a.stream)
	}
	// A body that ends at the connection's end is not whole before it.
	f := framer{response: true, headMax: 1024, bodyMax: 4096}
	n, err := f.scan([]byte("HTTP/1.1 200 OK\r\n\r\npart"), false)
	assert.Nil(t, err)
	assert.Zero(t, n)
	for _, bad := range []string{"HTTP/1.1 101 Switching Protocols\r\n\r\n", "HTTP/1.1 2x0 OK\r\n\r\n", "HTTP/1.1 099 Low\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 9999\r\n\r\n"} {
		f := framer{response: true, headMax: 1024, bodyMax: 4096}
		_, err := f.scan([]byte(bad), true)
		assert.NotNil(t, err, bad)
	}
}

// An answer passes verbatim only when nothing in it is the hop's to change,
// and the load report's value is found where it lies.
func TestFramerVerbatim(t *testing.T) {
	for _, a := range []struct {
		head     bool
		stream   string
		verbatim bool
		report   string
	}{
		{false, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", true, ""},
		{false, "HTTP/1.1 503 Busy\r\nendpoint-load-metrics:  TEXT cpu_utilization=0.5 \r\nEndpoint-Load-Metrics: TEXT eps=1\r\nContent-Length: 0\r\n\r\n", true, "TEXT cpu_utilization=0.5"},
		{true, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", false, ""},
		{false, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", false, ""},
		{false, "HTTP/1.1 200 OK\r\nkeep-alive: timeout=5\r\nContent-Length: 2\r\n\r\nok", false, ""},
		{false, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", false, ""},
		{false, "HTTP/1.1 200 OK\r\n\r\nuntil the end", false, ""},
		{false, "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", false, ""},
		{false, "HTTP/1.1 200 OK\nContent-Length: 2\r\n\r\nok", false, ""},
		{false, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\nok", false, ""},
		{false, "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", false, ""},
		{false, "HTTP/1.1 103 Early Hints\r\nContent-Length: 0\r\n\r\n", false, ""},
	} {
		f := framer{response: true, toHEAD: a.head, headMax: 1024, bodyMax: 4096}
		n, err := f.scan([]byte(a.stream), true)
		require.Nil(t, err, a.stream)
		require.Equal(t, len(a.stream), n, a.stream)
		assert.Equal(t, a.verbatim, f.verbatim(), a.stream)
		got := ""
		if f.report[1] > 0 {
			got = a.stream[f.report[0]:f.report[1]]
		}
		assert.Equal(t, a.report, got, a.stream)
	}
}

// consumed is how many bytes of stream br's reader has handed on.
func consumed(stream []byte, rd *bytes.Reader, br *bufio.Reader) int {
	return len(stream) - rd.Len() - br.Buffered()
}

// Any byte stream: fed whole or in pieces the framer says the same, and a
// request it frames that net/http reads from the same stream ends at the
// same byte for both — a framer that ended a request elsewhere than a worker's
// parser would let a client smuggle a request inside another's body.
func FuzzFramerRequest(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"\r\nPOST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;e\r\nabc\r\n0\r\nT: v\r\n\r\n",
		"POST / HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, stream []byte, piece uint8) {
		whole, werr := frameAll(reqFramer(), stream, 0)
		parts, perr := frameAll(reqFramer(), stream, int(piece%16)+1)
		if whole != parts || (werr == nil) != (perr == nil) || werr != nil && werr.status != perr.status {
			t.Fatalf("whole: %d %v; in pieces of %d: %d %v", whole, werr, piece%16+1, parts, perr)
		}
		if werr != nil || whole == 0 {
			return
		}
		rd := bytes.NewReader(stream)
		br := bufio.NewReader(rd)
		skipEmptyLines(br)
		req, err := http.ReadRequest(br)
		if err != nil {
			return // refused for what it says (a target, a header value), not for its length: the parsers after the framer refuse it too
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			t.Fatalf("framed %d bytes whose body net/http cannot read: %v", whole, err)
		}
		if n := consumed(stream, rd, br); n != whole {
			t.Fatalf("framed %d bytes, net/http read %d", whole, n)
		}
	})
}

// Any answer from a worker: fed whole or in pieces the framer says the
// same, and an answer it frames ends where net/http's client reads it to.
func FuzzFramerResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nto the end",
		"HTTP/1.1 200 OK\r\nEndpoint-Load-Metrics: TEXT eps=1\r\nKeep-Alive: x\r\nContent-Length: 2\r\n\r\nok",
	} {
		f.Add([]byte(s), false, uint8(2))
	}
	f.Fuzz(func(t *testing.T, stream []byte, head bool, piece uint8) {
		mk := func() framer { return framer{response: true, toHEAD: head, headMax: 1024, bodyMax: 4096} }
		whole, werr := frameAll(mk(), stream, 0)
		parts, perr := frameAll(mk(), stream, int(piece%16)+1)
		if whole != parts || (werr == nil) != (perr == nil) {
			t.Fatalf("whole: %d %v; in pieces of %d: %d %v", whole, werr, piece%16+1, parts, perr)
		}
		probe := mk()
		probe.scan(stream, true)
		if werr != nil || whole == 0 || probe.interim {
			return
		}
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		rd := bytes.NewReader(stream)
		br := bufio.NewReader(rd)
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			return // refused for what it says, not for its length
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatalf("framed %d bytes whose body net/http cannot read: %v", whole, err)
		}
		if n := consumed(stream, rd, br); n != whole {
			t.Fatalf("framed %d bytes, net/http read %d", whole, n)
		}
		if !probe.verbatim() {
			return
		}
		// An answer passed on byte for byte has nothing of this hop in it,
		// and its load report is the one net/http reads.
		if !resp.ProtoAtLeast(1, 1) || resp.ContentLength < 0 || len(resp.TransferEncoding) > 0 || resp.Close {
			t.Fatalf("passed verbatim: %s, length %d, codings %v, close %v", resp.Proto, resp.ContentLength, resp.TransferEncoding, resp.Close)
		}
		for _, h := range hopHeaders {
			if _, ok := resp.Header[http.CanonicalHeaderKey(h)]; ok {
				t.Fatalf("passed verbatim with the hop-by-hop %s", h)
			}
		}
		report := ""
		if probe.report[1] > 0 {
			report = string(stream[probe.report[0]:probe.report[1]])
		}
		if want := resp.Header.Get(loadreport.Header); report != want {
			t.Fatalf("load report %q, net/http read %q", report, want)
		}
	})
}
