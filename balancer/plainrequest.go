package balancer

import (
	"bytes"
	"net"

	"golang.org/x/net/http/httpguts"
)

// A client's request on the epoll front goes on with its head as the
// client sent it, the X-Forwarded-* headers added at its end, when there
// is nothing in it to drop or merge — as a worker's answer goes back
// byte for byte when it can (framer.verbatim). wrk's requests, and most a
// proxy sees, are such requests; parsing each with fasthttp and writing it
// out again was most of the front's own work per request besides the
// system calls (docs/balancer-front.md). Any other request takes that
// path (client.parsed).

// requestField notes what framer.plain needs from a request's header line;
// value begins at offset at of the buffer.
func (f *framer) requestField(name, value []byte, at int) {
	switch {
	case headerIs(name, "Host"):
		f.hosts++
		f.host = [2]int{at, at + len(value)}
	case headerIs(name, "Expect"):
		f.hasExpect = true
	case headerIs(name, "Idempotency-Key"):
		f.idemKey = true
	case headerIs(name, "X-Forwarded-For"), headerIs(name, "X-Forwarded-Host"), headerIs(name, "X-Forwarded-Proto"):
		f.xfwded = true
	}
}

// headerIs reports whether a header's name is lit, in any case.
func headerIs(name []byte, lit string) bool {
	return len(name) == len(lit) && bytes.EqualFold(name, []byte(lit))
}

// plain reports whether the request framed in buf can go on with its head
// as it came: HTTP/1.1, a method that is a token, a target in origin form
// (checkTarget still holds it to net/http's rules), one valid Host, every
// head line in CRLF, and no hop-by-hop header (Connection, Upgrade and
// Transfer-Encoding among them), no Expect and no X-Forwarded-* header —
// what the parsed path drops, answers or merges.
func (f *framer) plain(buf []byte) bool {
	if f.response || f.phase != framed || f.http10 || f.hop || f.bareLF || f.hasExpect || f.xfwded || f.hosts != 1 {
		return false
	}
	for _, c := range buf[f.start:f.methodEnd] {
		if !tokenChar(c) {
			return false
		}
	}
	return buf[f.target[0]] == '/' && httpguts.ValidHostHeader(string(buf[f.host[0]:f.host[1]]))
}

// plainRequest makes x the request framed in msg (framer.plain) as the
// worker gets it, or returns the status and reason to refuse it with.
func (c *client) plainRequest(x *exchange, msg []byte) (int, string) {
	f := &c.fr
	if status, why := checkTarget(msg[f.target[0]:f.target[1]]); status != 0 {
		return status, why
	}
	method := string(msg[f.start:f.methodEnd]) // not kept: no allocation
	x.head, x.http11 = method == "HEAD", true
	x.idempotent = method == "GET" || method == "HEAD" || method == "OPTIONS" || f.idemKey
	x.closeAfter = c.l.draining
	w := append(x.wire[:0], msg[f.start:f.headEnd-2]...)
	if a, ok := c.remote.(*net.TCPAddr); ok {
		w = appendClientIP(append(w, "X-Forwarded-For: "...), a)
		w = append(w, "\r\n"...)
	}
	w = append(append(w, "X-Forwarded-Host: "...), msg[f.host[0]:f.host[1]]...)
	w = append(w, "\r\nX-Forwarded-Proto: http\r\n\r\n"...)
	x.wire = append(w, msg[f.headEnd:]...)
	return 0, ""
}
