package balancer

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"

	"github.com/ringside/ringside/internal/loadreport"
)

// framer finds where one HTTP/1.1 message ends in bytes that arrive in
// pieces (RFC 9112 §6), for the epoll front, which must know a message is
// whole before it parses it once with fasthttp's readers: handing those
// readers part of a message would parse a large body again from its start
// at every piece. It is a pure state machine over a buffer that only grows
// while a message is framed; each call scans only what is new.
//
// It is stricter than the parsers around it on purpose: what it refuses
// costs a 400, what it frames differently from the parser would be a
// request smuggled. Both Content-Length and Transfer-Encoding, either one
// twice, a Transfer-Encoding other than chunked, a bare CR, a folded or
// malformed header line, a chunk line that is not hex digits (with an
// optional extension) ending in CRLF: all refused.
type framer struct {
	response bool  // frame a worker's answer, not a client's request
	toHEAD   bool  // the answer is to a HEAD request: no body
	headMax  int   // bytes a head (or a chunked body's trailer) may hold
	bodyMax  int64 // bytes a body may hold, decoded

	phase   framePhase
	line    int   // where the line being scanned begins
	headEnd int   // where the body begins
	left    int64 // bytes left in a fixed body or in the current chunk
	body    int64 // body bytes so far, decoded

	status   int  // a response's status code
	http10   bool // an HTTP/1.0 message
	interim  bool // a 1xx answer: drop it, a final one follows
	expect   bool // the request asks for 100 Continue
	length   int64
	hasLen   bool
	chunked  bool
	lines    int // lines of the head so far
	trailers int // bytes of trailer so far

	// What a worker's answer needs to pass on as it came (see
	// framer.verbatim), or to be rewritten: a hop-by-hop header in the
	// head, a head line ending in a bare LF, where the load report's value
	// lies in the buffer (end 0: no report).
	hop, bareLF bool
	report      [2]int

	// What a client's request needs to go on with its head as it came
	// (framer.plain), in offsets of the buffer: where its request-line
	// begins and its method ends, its target, its Host's value and how many
	// Host lines it has; whether it has an Expect, an Idempotency-Key or an
	// X-Forwarded-* header.
	start, methodEnd           int
	target, host               [2]int
	hosts                      int
	hasExpect, idemKey, xfwded bool
}

type framePhase uint8

const (
	inHead framePhase = iota
	inFixed
	inChunkSize
	inChunkData
	inChunkEnd
	inTrailer
	untilClose
	framed
)

// frameError is why a message cannot be framed, with the status a request
// refused for it gets (a worker's answer refused is a 502 whatever the
// reason).
type frameError struct {
	status int
	msg    string
}

func (e *frameError) Error() string { return e.msg }

func malformed(msg string) *frameError { return &frameError{http.StatusBadRequest, msg} }

const maxChunkLine = 4096

// reset makes f ready for the next message.
func (f *framer) reset() {
	*f = framer{response: f.response, headMax: f.headMax, bodyMax: f.bodyMax}
}

// headDone reports whether the head has been read (the body may not have).
func (f *framer) headDone() bool { return f.phase != inHead }

// scan frames the message at the start of buf, which holds what an earlier
// call saw and perhaps more; eof says nothing more will come. It returns
// the message's length once it is complete (0 before), or why it cannot be.
func (f *framer) scan(buf []byte, eof bool) (int, *frameError) {
	if f.phase == inHead {
		if err := f.scanHead(buf); err != nil || f.phase == inHead {
			return 0, err
		}
	}
	for {
		switch f.phase {
		case framed:
			return f.line, nil
		case untilClose:
			if f.body = int64(len(buf) - f.headEnd); f.body > f.bodyMax {
				return 0, tooLarge()
			}
			if !eof {
				return 0, nil
			}
			f.line, f.phase = len(buf), framed
		case inFixed:
			if int64(len(buf)-f.headEnd) < f.length {
				return 0, nil
			}
			f.line, f.phase = f.headEnd+int(f.length), framed
		case inChunkSize:
			if int64(f.line) > int64(f.headMax)+2*f.bodyMax {
				// Chunked framing around a small body: the raw bytes are
				// bounded too, so memory per client is.
				return 0, &frameError{http.StatusRequestEntityTooLarge, "the message's chunked framing is over the body limit"}
			}
			end := bytes.IndexByte(buf[f.line:], '\n')
			if end < 0 {
				if len(buf)-f.line > maxChunkLine {
					return 0, malformed("a chunk-size line over 4 KiB")
				}
				return 0, nil
			}
			size, err := chunkSize(buf[f.line : f.line+end+1])
			if err != nil {
				return 0, err
			}
			f.line += end + 1
			if size == 0 {
				f.phase = inTrailer
				continue
			}
			if f.body += size; f.body > f.bodyMax || f.body < 0 {
				return 0, tooLarge()
			}
			f.left, f.phase = size, inChunkData
		case inChunkData:
			n := min(f.left, int64(len(buf)-f.line))
			f.line += int(n)
			if f.left -= n; f.left > 0 {
				return 0, nil
			}
			f.phase = inChunkEnd
		case inChunkEnd:
			if len(buf)-f.line < 2 {
				return 0, nil
			}
			if buf[f.line] != '\r' || buf[f.line+1] != '\n' {
				return 0, malformed("a chunk's data does not end in CRLF")
			}
			f.line += 2
			f.phase = inChunkSize
		case inTrailer:
			end := bytes.IndexByte(buf[f.line:], '\n')
			if end < 0 {
				if f.trailers+len(buf)-f.line > f.headMax {
					return 0, &frameError{http.StatusRequestHeaderFieldsTooLarge, "the trailer section is over the head limit"}
				}
				return 0, nil
			}
			line := buf[f.line : f.line+end+1]
			if len(line) < 2 || line[len(line)-2] != '\r' {
				// net/http's reader of trailers wants CRLF: a bare LF here
				// would end the body elsewhere for it.
				return 0, malformed("a trailer line that does not end in CRLF")
			}
			f.trailers += len(line)
			f.line += end + 1
			if f.trailers > f.headMax {
				return 0, &frameError{http.StatusRequestHeaderFieldsTooLarge, "the trailer section is over the head limit"}
			}
			content, err := lineContent(line)
			if err != nil {
				return 0, err
			}
			if len(content) == 0 {
				f.phase = framed
				continue
			}
			if _, _, err := fieldLine(content); err != nil {
				return 0, err
			}
		}
	}
}

func tooLarge() *frameError {
	return &frameError{http.StatusRequestEntityTooLarge, "the body is over the front's limit"}
}

// scanHead reads the head's lines as they arrive and decides the body's
// framing once the empty line ends it.
func (f *framer) scanHead(buf []byte) *frameError {
	for {
		end := bytes.IndexByte(buf[f.line:], '\n')
		if end < 0 {
			if len(buf) > f.headMax {
				return &frameError{http.StatusRequestHeaderFieldsTooLarge, "the head is over the front's limit"}
			}
			return nil
		}
		at := f.line
		line := buf[at : at+end+1]
		f.line += end + 1
		// Empty lines before a request-line count: they are bytes held too.
		if f.line > f.headMax {
			return &frameError{http.StatusRequestHeaderFieldsTooLarge, "the head is over the front's limit"}
		}
		content, err := lineContent(line)
		if err != nil {
			return err
		}
		if len(content) == len(line)-1 {
			f.bareLF = true
		}
		switch {
		case f.lines == 0 && len(content) == 0 && !f.response:
			// Empty lines before a request-line are skipped (RFC 9112 §2.2).
			continue
		case f.lines == 0:
			if err := f.firstLine(content, at); err != nil {
				return err
			}
		case len(content) == 0:
			f.headEnd = f.line
			return f.bodyFraming()
		default:
			if err := f.field(content, at); err != nil {
				return err
			}
		}
		f.lines++
	}
}

// lineContent is a line without its CRLF (or bare LF); a CR anywhere else
// is refused: parsers differ on whether it ends a line.
func lineContent(line []byte) ([]byte, *frameError) {
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, malformed("a bare CR in the head")
	}
	return line, nil
}

// firstLine reads the request- or status-line, which begins at offset at
// of the buffer.
func (f *framer) firstLine(line []byte, at int) *frameError {
	// Cut by hand: bytes.Split allocated on every message.
	first, rest, _ := bytes.Cut(line, []byte(" "))
	second, third, found := bytes.Cut(rest, []byte(" "))
	if !f.response {
		if !found || len(first) == 0 || len(second) == 0 || !httpVersion(third) {
			return malformed("a malformed request-line")
		}
		f.http10 = third[7] == '0'
		f.start, f.methodEnd = at, at+len(first)
		f.target = [2]int{f.methodEnd + 1, f.methodEnd + 1 + len(second)}
		return nil
	}
	if !httpVersion(first) || len(second) != 3 {
		return malformed("a malformed status-line")
	}
	f.http10 = first[7] == '0'
	for _, c := range second {
		if c < '0' || c > '9' {
			return malformed("a malformed status code")
		}
		f.status = f.status*10 + int(c-'0')
	}
	if f.status < 100 {
		return malformed("a status code under 100")
	}
	return nil
}

func httpVersion(v []byte) bool {
	return len(v) == 8 && string(v[:7]) == "HTTP/1." && (v[7] == '0' || v[7] == '1')
}

// fieldLine splits a header line into its name and value (RFC 9112 §5):
// a token for a name, no space before the colon, no control character in
// the value but a tab; a line folded onto the previous one is refused.
func fieldLine(line []byte) (name, value []byte, err *frameError) {
	if line[0] == ' ' || line[0] == '\t' {
		return nil, nil, malformed("a folded header line")
	}
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return nil, nil, malformed("a header line without a name and a colon")
	}
	name = line[:colon]
	for _, c := range name {
		if !tokenChar(c) {
			return nil, nil, malformed("a header name that is not a token")
		}
	}
	value = bytes.Trim(line[colon+1:], " \t")
	for _, c := range value {
		if c < ' ' && c != '\t' || c == 0x7f {
			return nil, nil, malformed("a control character in a header value")
		}
	}
	return name, value, nil
}

func tokenChar(c byte) bool { return tokenChars[c] }

// tokenChars is RFC 9110's tchar as a table: every header name's bytes
// are looked up in it.
var tokenChars = func() (t [256]bool) {
	for c := range 256 {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0
	}
	return t
}()

// field takes what framing needs from one header line, which begins at
// offset at of the buffer.
func (f *framer) field(line []byte, at int) *frameError {
	name, value, err := fieldLine(line)
	if err != nil {
		return err
	}
	if isHopHeader(name) {
		f.hop = true
	}
	// value is a part of line: their capacities differ by its offset (an
	// empty one may be nil).
	valueAt := at
	if len(value) > 0 {
		valueAt += cap(line) - cap(value)
	}
	if f.response && f.report[1] == 0 && bytes.EqualFold(name, []byte(loadreport.Header)) {
		f.report = [2]int{valueAt, valueAt + len(value)}
	}
	if !f.response {
		f.requestField(name, value, valueAt)
	}
	switch {
	case bytes.EqualFold(name, []byte("Content-Length")):
		if f.hasLen {
			return malformed("Content-Length twice")
		}
		f.hasLen = true
		n, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil || !allDigits(value) {
			// Past int64 too: no length a message can have.
			return malformed("a Content-Length that is not a number")
		}
		if f.length = n; f.length > f.bodyMax {
			return tooLarge()
		}
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		if f.chunked {
			return malformed("Transfer-Encoding twice")
		}
		if !bytes.EqualFold(value, []byte("chunked")) {
			return &frameError{http.StatusNotImplemented, "a Transfer-Encoding other than chunked"}
		}
		f.chunked = true
	case !f.response && bytes.EqualFold(name, []byte("Expect")):
		f.expect = bytes.EqualFold(value, []byte("100-continue"))
	}
	return nil
}

// verbatim reports whether a framed answer can go to an HTTP/1.1 client
// byte for byte, as the worker sent it: an HTTP/1.1 answer framed by its
// Content-Length, with no hop-by-hop header to drop and every head line in
// CRLF. The others are parsed and written again (upconn.answer).
func (f *framer) verbatim() bool {
	return f.response && f.status >= 200 && f.status != http.StatusNoContent && f.status != http.StatusNotModified &&
		!f.toHEAD && f.hasLen && !f.chunked && !f.http10 && !f.hop && !f.bareLF
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// bodyFraming decides how the body after the head ends (RFC 9112 §6.3).
func (f *framer) bodyFraming() *frameError {
	if f.chunked && f.hasLen {
		return malformed("both Content-Length and Transfer-Encoding")
	}
	if f.chunked && f.http10 {
		// HTTP/1.0 has no chunked coding: its framing is faulty (RFC
		// 9112 §6.1), and net/http ignores the header where fasthttp
		// would not.
		return malformed("Transfer-Encoding in an HTTP/1.0 message")
	}
	if f.response {
		switch {
		case f.status == http.StatusSwitchingProtocols:
			return malformed("a protocol switch, which the front does not proxy")
		case f.status < 200:
			f.interim = true
			f.phase = framed
			return nil
		case f.toHEAD || f.status == http.StatusNoContent || f.status == http.StatusNotModified:
			f.phase = framed
			return nil
		case !f.chunked && !f.hasLen:
			f.phase = untilClose
			return nil
		}
	}
	switch {
	case f.chunked:
		f.phase = inChunkSize
	case f.length > 0:
		f.phase = inFixed
	default:
		f.phase = framed
	}
	return nil
}

// chunkSize reads a chunk-size line: hex digits, an optional extension
// after a semicolon, CRLF.
func chunkSize(line []byte) (int64, *frameError) {
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return 0, malformed("a chunk-size line that does not end in CRLF")
	}
	line = line[:len(line)-2]
	if semi := bytes.IndexByte(line, ';'); semi >= 0 {
		for _, c := range line[semi+1:] {
			if c < ' ' && c != '\t' || c == 0x7f {
				return 0, malformed("a control character in a chunk extension")
			}
		}
		line = line[:semi]
	}
	if len(line) == 0 || len(line) > 15 {
		return 0, malformed("a chunk size that is not 1 to 15 hex digits")
	}
	var n int64
	for _, c := range line {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, malformed("a chunk size that is not hex")
		}
		n = n<<4 | int64(d)
	}
	return n, nil
}
