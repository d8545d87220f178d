package balancer

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ringside/ringside/internal/accept"
	"github.com/ringside/ringside/internal/loadreport"
)

// FastFront serves the balancer on fasthttp: its server parses requests
// into reused buffers and its HostClient keeps each worker's keep-alive
// connections, so a near-free request allocates nothing and costs the
// four system calls nginx pays. Unlike Front it buffers bodies whole, as
// nginx does by default (proxy_request_buffering, proxy_buffering): a
// request body over MaxBodyBytes gets 413, a worker's answer over it 502,
// and a request head over HeadBytes 431 — memory per client is bounded by
// those. It was the default until the epoll front, which does the same
// without a goroutine per connection (docs/balancer-front.md).
type FastFront struct {
	B *Balancer
	// Addr is where ListenAndServe listens.
	Addr string
	// IdleTimeout closes a client connection that sends no request for
	// that long; HeaderTimeout bounds reading one request.
	IdleTimeout, HeaderTimeout time.Duration
	// HeadBytes bounds a request's head (default 64 KiB; nginx's is
	// 32 KiB); MaxBodyBytes a request's or an answer's body (default 8 MiB).
	HeadBytes, MaxBodyBytes int

	mu       sync.Mutex
	srv      *fasthttp.Server
	ln       net.Listener
	shutdown atomic.Bool
	clients  sync.Map      // worker address → *fasthttp.HostClient
	swept    atomic.Uint64 // the table whose departed workers' clients were closed
}

const (
	defaultHeadBytes = 64 << 10
	defaultBodyBytes = 8 << 20
)

// ListenAndServe listens on f.Addr and serves until Shutdown.
func (f *FastFront) ListenAndServe() error {
	ln, err := accept.Listen(f.Addr)
	if err != nil {
		return err
	}
	return f.Serve(ln)
}

// Serve accepts client connections from ln until Shutdown.
func (f *FastFront) Serve(ln net.Listener) error {
	srv := &fasthttp.Server{
		Handler:     f.handle,
		Logger:      fastLogger{f.B},
		ReadTimeout: cmp.Or(f.HeaderTimeout, 10*time.Second),
		IdleTimeout: cmp.Or(f.IdleTimeout, 90*time.Second),
		// The read buffer holds a whole head: its size is the head limit.
		ReadBufferSize:     cmp.Or(f.HeadBytes, defaultHeadBytes),
		MaxRequestBodySize: cmp.Or(f.MaxBodyBytes, defaultBodyBytes),
		// The worker's own Date, Server and Content-Type go back as sent.
		NoDefaultServerHeader:        true,
		NoDefaultDate:                true,
		NoDefaultContentType:         true,
		DisablePreParseMultipartForm: true,
		CloseOnShutdown:              true,
		ErrorHandler:                 f.refuse,
	}
	f.mu.Lock()
	if f.shutdown.Load() {
		f.mu.Unlock()
		ln.Close()
		return http.ErrServerClosed
	}
	f.srv, f.ln = srv, ln
	f.mu.Unlock()
	// fasthttp's own accept loop ends on EMFILE; a patient listener waits
	// for descriptors instead.
	err := srv.Serve(accept.Patient(ln, f.B.log))
	if f.shutdown.Load() {
		return http.ErrServerClosed
	}
	return err
}

// Shutdown stops accepting, closes idle client connections, lets the busy
// ones finish their request, and waits for them until ctx ends.
func (f *FastFront) Shutdown(ctx context.Context) error {
	f.shutdown.Store(true)
	f.mu.Lock()
	srv, ln := f.srv, f.ln
	f.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.ShutdownWithContext(ctx)
	// Closed here too: a Serve that had not yet handed ln to fasthttp
	// finds it closed, rather than serving after the shutdown.
	ln.Close()
	return err
}

// refuse answers a request fasthttp could not read: 431 for a head over
// the limit, 413 for a body over it, 400 for anything else malformed.
func (f *FastFront) refuse(ctx *fasthttp.RequestCtx, err error) {
	status := http.StatusBadRequest
	var small *fasthttp.ErrSmallBuffer
	switch {
	case errors.As(err, &small):
		status = http.StatusRequestHeaderFieldsTooLarge
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		status = http.StatusRequestEntityTooLarge
	}
	fastError(ctx, status, "malformed request: "+err.Error())
	ctx.SetConnectionClose()
}

func fastError(ctx *fasthttp.RequestCtx, status int, msg string) {
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.Response.Header.SetContentType("text/plain; charset=utf-8")
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.SetBodyString(msg + "\n")
}

// fastHeaders is what dropFastHopHeaders needs of a request's or a
// response's header.
type fastHeaders interface {
	PeekAll(string) [][]byte
	Del(string)
}

// hopHeaderNames is hopHeaders as bytes, to compare names without a
// conversion (which allocated on every request).
var hopHeaderNames = func() [][]byte {
	out := make([][]byte, len(hopHeaders))
	for i, n := range hopHeaders {
		out[i] = []byte(n)
	}
	return out
}()

// isHopHeader reports whether name is one of hopHeaders, in any case.
func isHopHeader(name []byte) bool {
	for _, n := range hopHeaderNames {
		if len(n) == len(name) && bytes.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// dropFastHopHeaders removes a connection's own headers (RFC 9110 §7.6.1)
// and those its Connection header names from a request's or a response's
// header whose scan for them (requestHasHop, responseHasHop) found one.
func dropFastHopHeaders(h fastHeaders) {
	for _, v := range h.PeekAll("Connection") {
		for name := range bytes.SplitSeq(v, []byte(",")) {
			if name = bytes.TrimSpace(name); len(name) > 0 {
				h.Del(string(name))
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// requestHasHop reports whether a request's header holds a hop-by-hop
// header. Most messages carry none: one pass over the header finds that,
// where a Del per name would normalise and search nine times. It and
// responseHasHop take the header's own type, so that its iterator and the
// loop's body are compiled in place; through an interface (or a generic
// function, whose two pointer types share one instantiation) they were
// allocated on every request.
func requestHasHop(h *fasthttp.RequestHeader) bool {
	for k := range h.All() {
		if isHopHeader(k) {
			return true
		}
	}
	return false
}

// responseHasHop is requestHasHop for a worker's answer.
func responseHasHop(h *fasthttp.ResponseHeader) bool {
	for k := range h.All() {
		if isHopHeader(k) {
			return true
		}
	}
	return false
}

func (f *FastFront) handle(ctx *fasthttp.RequestCtx) {
	b := f.B
	req := &ctx.Request
	if status, msg := forwardable(req, ctx.RemoteAddr()); status != 0 {
		fastError(ctx, status, msg)
		ctx.SetConnectionClose()
		return
	}

	t := b.table.Load()
	if t == nil {
		fastError(ctx, http.StatusServiceUnavailable, errNoWorker.Error())
		return
	}
	attempts := 1
	if fastIdempotent(req) {
		attempts += b.retries
	}
	resp := &ctx.Response
	err := b.try(t, attempts, func(i int, up upstream, start time.Duration, _ bool) error {
		hc := f.client(up.Addr)
		err := hc.Do(req, resp)
		f.sweep(up.Addr, hc)
		if err != nil {
			if errors.Is(err, fasthttp.ErrBodyTooLarge) {
				return stop(errAnswerTooLarge)
			}
			return err
		}
		if t.readsLoadReports {
			b.reported(up, string(resp.Header.Peek(loadreport.Header)))
		}
		if responseHasHop(&resp.Header) {
			dropFastHopHeaders(&resp.Header)
		}
		resp.Header.ResetConnectionClose()
		b.done(t, i, start, false)
		return nil
	})
	if err == nil {
		return
	}
	status := http.StatusBadGateway
	if errors.Is(err, errNoWorker) {
		status = http.StatusServiceUnavailable
	}
	fastError(ctx, status, err.Error())
}

// forwardable turns the client's request, from remote, into the one the
// worker gets — without hop-by-hop headers, with X-Forwarded-For, -Host
// and -Proto — or returns the status and reason to refuse it with.
func forwardable(req *fasthttp.Request, remote net.Addr) (int, string) {
	if status, msg := checkTarget(req.Header.RequestURI()); status != 0 {
		return status, msg
	}
	if len(req.Header.Peek("Upgrade")) > 0 {
		return http.StatusNotImplemented, "protocol upgrades are not proxied"
	}
	// fasthttp answered Expect: 100-continue itself; the body is here.
	req.Header.Del("Expect")
	if requestHasHop(&req.Header) {
		dropFastHopHeaders(&req.Header)
	}
	if a, ok := remote.(*net.TCPAddr); ok {
		// Written into a buffer on the stack (the header copies it):
		// a.IP.String() allocated on every request.
		var buf [64]byte
		host := appendClientIP(buf[:0], a)
		if prior := req.Header.PeekAll("X-Forwarded-For"); len(prior) > 0 {
			host = append(append(bytes.Join(prior, []byte(", ")), ", "...), host...)
		}
		req.Header.SetBytesV("X-Forwarded-For", host)
	}
	req.Header.SetBytesV("X-Forwarded-Host", req.Header.Host())
	req.Header.Set("X-Forwarded-Proto", "http")
	// The client's Connection: close is for this hop: the request goes on
	// without it. fasthttp noted it before the handler ran and closes the
	// client's connection after the answer itself (and on shutdown:
	// CloseOnShutdown).
	req.Header.ResetConnectionClose()
	return 0, ""
}

// checkTarget holds a request-target to net/http's rules (the workers'
// parser): fasthttp, and the epoll front's framer, let through targets
// net/http refuses (a bad escape, a control character); a fragment, which
// has no place in a request-target (RFC 9112 §3.2) and which fasthttp
// cuts off where net/http escapes it into the path, is refused too.
func checkTarget(target []byte) (int, string) {
	if bytes.IndexByte(target, '#') >= 0 {
		return http.StatusBadRequest, "malformed request: a fragment (#) in the request-target"
	}
	if _, err := url.ParseRequestURI(string(target)); err != nil {
		return http.StatusBadRequest, "malformed request: " + err.Error()
	}
	return 0, ""
}

// appendClientIP appends a client's address as X-Forwarded-For names it,
// as net.IP prints it: IPv4 dotted (also when mapped into IPv6), no zone.
func appendClientIP(b []byte, a *net.TCPAddr) []byte {
	return a.AddrPort().Addr().Unmap().WithZone("").AppendTo(b)
}

var errAnswerTooLarge = errors.New("the worker's answer is over the front's body limit")

// fastIdempotent is idempotent for a buffered request: its body can be
// sent again, so only the method (or an Idempotency-Key) decides.
func fastIdempotent(r *fasthttp.Request) bool {
	h := &r.Header
	return h.IsGet() || h.IsHead() || h.IsOptions() || len(h.Peek("Idempotency-Key")) > 0
}

// client is the worker's HostClient: its keep-alive connections.
func (f *FastFront) client(addr string) *fasthttp.HostClient {
	if c, ok := f.clients.Load(addr); ok {
		return c.(*fasthttp.HostClient)
	}
	c, _ := f.clients.LoadOrStore(addr, &fasthttp.HostClient{
		Addr: addr,
		// Connections at once to one worker: past it a request fails
		// (ErrNoFreeConns) and try moves on; four times the conn front's
		// idle pool.
		MaxConns:                 poolSize * 4,
		MaxIdleConnDuration:      upstreamIdle,
		ReadTimeout:              30 * time.Second,
		WriteTimeout:             30 * time.Second,
		MaxResponseBodySize:      cmp.Or(f.MaxBodyBytes, defaultBodyBytes),
		ReadBufferSize:           defaultHeadBytes,
		NoDefaultUserAgentHeader: true,
		// The request goes on with the client's header names and path.
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		// One more try on a fresh connection when a pooled one the worker
		// closed meanwhile fails — for requests that may be sent twice;
		// the others fail to try (and, idempotent or not, try's retries).
		MaxIdemponentCallAttempts: 2,
		RetryIfErr: func(r *fasthttp.Request, _ int, _ error) (bool, bool) {
			return false, fastIdempotent(r)
		},
	})
	return c.(*fasthttp.HostClient)
}

// sweep closes the idle connections of workers that left the table: a
// departed worker keeps no file descriptors here.
func (f *FastFront) sweep(addr string, hc *fasthttp.HostClient) {
	// A load first: a swap on every request would write a shared cache
	// line on the proxy's hot path.
	if seq := f.B.Seq(); f.swept.Load() != seq && f.swept.Swap(seq) != seq {
		f.clients.Range(func(a, c any) bool {
			if !f.B.serves(a.(string)) {
				f.clients.Delete(a)
				c.(*fasthttp.HostClient).CloseIdleConnections()
			}
			return true
		})
	}
	if !f.B.serves(addr) {
		f.clients.Delete(addr)
		hc.CloseIdleConnections()
	}
}

// fastLogger sends fasthttp's own messages (accept errors, connections
// cut) to the balancer's log at debug level: a client's bad request is
// answered, not logged at every level.
type fastLogger struct{ b *Balancer }

func (l fastLogger) Printf(format string, args ...any) {
	l.b.log.Debug("fasthttp", "msg", fmt.Sprintf(format, args...))
}
