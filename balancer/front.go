package balancer

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringside/ringside/internal/accept"
)

// Front serves the balancer on a listener the way nginx does: each client
// connection is one goroutine that reads a request, writes it to a pooled
// keep-alive connection to the chosen worker, reads the answer and writes
// it back — four system calls a request, no hand-off between goroutines.
// net/http's server and Transport (ServeHTTP) cost about twice that per
// near-free request (lb-proxy: 0.56 × nginx's requests per second).
// Requests and responses are parsed and framed by net/http's own
// http.ReadRequest / Request.Write / http.ReadResponse / Response.Write.
// It speaks HTTP/1.x; upgrades (websockets) are refused with 501.
type Front struct {
	B *Balancer
	// Addr is where ListenAndServe listens.
	Addr string
	// IdleTimeout closes a client connection that sends no request for
	// that long; HeaderTimeout bounds reading one request's headers.
	IdleTimeout, HeaderTimeout time.Duration

	mu       sync.Mutex
	ln       net.Listener
	conns    map[net.Conn]bool // value: busy with a request
	closed   bool
	wg       sync.WaitGroup
	shutdown atomic.Bool
	pools    sync.Map      // worker address → pool
	swept    atomic.Uint64 // the table whose departed workers' pools were dropped
}

// ListenAndServe listens on f.Addr and serves until Shutdown.
func (f *Front) ListenAndServe() error {
	ln, err := accept.Listen(f.Addr)
	if err != nil {
		return err
	}
	return f.Serve(ln)
}

// Serve accepts client connections from ln until Shutdown.
func (f *Front) Serve(ln net.Listener) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		ln.Close()
		return http.ErrServerClosed
	}
	f.ln, f.conns = ln, map[net.Conn]bool{}
	f.mu.Unlock()
	err := accept.Loop(ln, f.B.log, func(c net.Conn) {
		f.mu.Lock()
		f.conns[c] = false
		f.wg.Add(1)
		f.mu.Unlock()
		go f.serveConn(c)
	})
	if f.shutdown.Load() {
		return http.ErrServerClosed
	}
	return err
}

// Shutdown stops accepting, closes idle client connections, lets the busy
// ones finish their request, and waits for them until ctx ends.
func (f *Front) Shutdown(ctx context.Context) error {
	f.shutdown.Store(true)
	f.mu.Lock()
	f.closed = true
	if f.ln != nil {
		f.ln.Close()
	}
	for c, busy := range f.conns {
		if !busy {
			c.Close()
		}
	}
	f.mu.Unlock()
	done := make(chan struct{})
	go func() { f.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		for c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		return ctx.Err()
	}
}

func (f *Front) setBusy(c net.Conn, busy bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shutdown.Load() && !busy {
		return false
	}
	f.conns[c] = busy
	return true
}

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4096) }}
)

// maxHeaderBytes bounds a request's head, as net/http's server does: a
// client cannot make the front buffer headers without end.
const maxHeaderBytes = 1 << 20

// budget reads at most n bytes from r before it reports the head too
// large; the body of a request is read with the budget lifted.
type budget struct {
	r io.Reader
	n int64
}

var errHeadTooLarge = errors.New("request head over 1 MiB")

func (b *budget) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, errHeadTooLarge
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	return n, err
}

func (f *Front) serveConn(c net.Conn) {
	br, bw := readers.Get().(*bufio.Reader), writers.Get().(*bufio.Writer)
	lim := &budget{r: c}
	br.Reset(lim)
	bw.Reset(c)
	defer func() {
		c.Close()
		br.Reset(nil)
		bw.Reset(nil)
		readers.Put(br)
		writers.Put(bw)
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
		f.wg.Done()
	}()
	idle, header := cmp.Or(f.IdleTimeout, 90*time.Second), cmp.Or(f.HeaderTimeout, 10*time.Second)
	for {
		c.SetReadDeadline(time.Now().Add(idle))
		lim.n = 1<<63 - 1
		if _, err := br.Peek(1); err != nil {
			return // closed, idle too long, or shut down
		}
		if !f.setBusy(c, true) {
			return
		}
		c.SetReadDeadline(time.Now().Add(header))
		lim.n = maxHeaderBytes + int64(br.Buffered())
		req, err := http.ReadRequest(br)
		if err != nil {
			status := http.StatusBadRequest
			if errors.Is(err, errHeadTooLarge) {
				status = http.StatusRequestHeaderFieldsTooLarge
			}
			writeError(bw, nil, status, fmt.Sprintf("malformed request: %v", err), true)
			bw.Flush()
			return
		}
		lim.n = 1<<63 - 1
		c.SetReadDeadline(time.Time{})
		keep := f.handle(c, req, bw)
		if br.Buffered() == 0 { // pipelined requests share one write
			if bw.Flush() != nil {
				return
			}
		}
		if !keep || !f.setBusy(c, false) {
			bw.Flush()
			return
		}
	}
}

// hopHeaders are a connection's own, never forwarded (RFC 9110 §7.6.1).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func dropHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// handle proxies one request and writes its answer to bw; it reports
// whether the client connection may carry another request.
func (f *Front) handle(c net.Conn, req *http.Request, bw *bufio.Writer) bool {
	b := f.B
	keep := !req.Close && !f.shutdown.Load()
	if req.Header.Get("Upgrade") != "" {
		writeError(bw, req, http.StatusNotImplemented, "protocol upgrades are not proxied", true)
		return false
	}
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		bw.Flush()
		req.Header.Del("Expect")
	}
	dropHopHeaders(req.Header)
	if host, _, err := net.SplitHostPort(c.RemoteAddr().String()); err == nil {
		if prior := req.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			host = strings.Join(prior, ", ") + ", " + host
		}
		req.Header.Set("X-Forwarded-For", host)
	}
	req.Header.Set("X-Forwarded-Host", req.Host)
	req.Header.Set("X-Forwarded-Proto", "http")
	if req.Header.Get("User-Agent") == "" {
		req.Header["User-Agent"] = []string{""} // Request.Write must not add Go's
	}

	t := b.table.Load()
	if t == nil {
		keep = drain(req) && keep
		writeError(bw, req, http.StatusServiceUnavailable, errNoWorker.Error(), !keep)
		return keep
	}
	attempts := 1
	replayable := req.Body == nil || req.Body == http.NoBody
	if idempotent(req) && replayable {
		attempts += b.retries
	}
	var keepClient bool
	err := b.try(t, attempts, func(i int, up upstream, start time.Duration, _ bool) error {
		resp, pc, err := f.exchange(up.Addr, req, replayable)
		if err != nil {
			return err
		}
		b.answered(t, i, resp.Header)
		upstreamKeep := !resp.Close
		dropHopHeaders(resp.Header)
		resp.Close = !keep
		werr := resp.Write(bw)
		// Response.Write read the body to its end unless the worker or
		// the client failed mid-way: then neither connection is reusable.
		resp.Body.Close()
		b.done(t, i, start, werr != nil && !isClientErr(werr))
		if werr == nil && upstreamKeep {
			f.put(up.Addr, pc)
		} else {
			pc.Close()
		}
		keepClient = keep && werr == nil
		return nil
	})
	if err == nil {
		return keepClient
	}
	status := http.StatusBadGateway
	if errors.Is(err, errNoWorker) {
		status = http.StatusServiceUnavailable
	}
	keep = drain(req) && keep
	writeError(bw, req, status, err.Error(), !keep)
	return keep
}

// isClientErr tells a failed write to the client from a failed read of the
// worker's body; Response.Write reports either. Only the latter is the
// worker's failure.
func isClientErr(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && ne.Op == "write"
}

// drain reads what is left of a request body that was not forwarded, so
// that the next request on the connection starts where it should, and
// reports whether it does. After a malformed body (a broken chunk) or one
// with over 1 MiB left, where the next request starts is unknown: the
// connection must close, or bytes of the body would be read as a request
// (smuggled past whatever judged the first one).
func drain(req *http.Request) bool {
	if req.Body == nil || req.Body == http.NoBody {
		return true
	}
	defer req.Body.Close()
	n, err := io.Copy(io.Discard, io.LimitReader(req.Body, maxDrain+1))
	return err == nil && n <= maxDrain
}

const maxDrain = 1 << 20

func writeError(bw *bufio.Writer, req *http.Request, status int, msg string, closing bool) {
	body := msg + "\n"
	resp := &http.Response{StatusCode: status, ProtoMajor: 1, ProtoMinor: 1, Request: req, Close: closing,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "X-Content-Type-Options": {"nosniff"}},
		ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body))}
	resp.Write(bw)
}

// workerConn is a keep-alive connection to a worker.
type workerConn struct {
	net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	idle time.Time // when it went back to the pool
}

type pool chan *workerConn

const (
	poolSize = 256
	// upstreamIdle is how long a pooled connection may wait for reuse:
	// longer, and the worker has likely closed it (its own idle timeout).
	upstreamIdle = time.Minute
)

func (f *Front) pool(addr string) pool {
	if p, ok := f.pools.Load(addr); ok {
		return p.(pool)
	}
	p, _ := f.pools.LoadOrStore(addr, make(pool, poolSize))
	return p.(pool)
}

// put returns wc to its worker's pool — unless the worker has left the
// table, whose pool is then closed whole: a departed worker keeps no file
// descriptors here.
func (f *Front) put(addr string, wc *workerConn) {
	// A load first: a swap on every request would write a shared cache
	// line on the proxy's hot path.
	if seq := f.B.Seq(); f.swept.Load() != seq && f.swept.Swap(seq) != seq {
		// A new table: drop the pools of the workers it left out.
		f.pools.Range(func(a, _ any) bool {
			if !f.B.serves(a.(string)) {
				f.dropPool(a.(string))
			}
			return true
		})
	}
	if !f.B.serves(addr) {
		wc.Close()
		f.dropPool(addr)
		return
	}
	wc.idle = time.Now()
	select {
	case f.pool(addr) <- wc:
	default:
		wc.Close()
	}
}

func (f *Front) dropPool(addr string) {
	p, ok := f.pools.LoadAndDelete(addr)
	if !ok {
		return
	}
	for {
		select {
		case wc := <-p.(pool):
			wc.Close()
		default:
			return
		}
	}
}

// exchange sends req to the worker at addr and reads its response head.
// A pooled connection the worker has meanwhile closed fails before any
// answer: a replayable request then goes once more on a fresh connection.
func (f *Front) exchange(addr string, req *http.Request, replayable bool) (*http.Response, *workerConn, error) {
	for attempt := 0; ; attempt++ {
		wc, reused, err := f.conn(addr, attempt > 0)
		if err != nil {
			return nil, nil, err
		}
		wc.SetDeadline(time.Now().Add(30 * time.Second))
		err = req.Write(wc.bw)
		if err == nil {
			err = wc.bw.Flush()
		}
		var resp *http.Response
		if err == nil {
			resp, err = http.ReadResponse(wc.br, req)
		}
		if err == nil {
			wc.SetDeadline(time.Time{})
			return resp, wc, nil
		}
		wc.Close()
		if !reused || !replayable || attempt > 0 {
			return nil, nil, err
		}
	}
}

func (f *Front) conn(addr string, fresh bool) (*workerConn, bool, error) {
	for !fresh {
		select {
		case wc := <-f.pool(addr):
			if time.Since(wc.idle) > upstreamIdle {
				wc.Close()
				continue
			}
			return wc, true, nil
		default:
			fresh = true
		}
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, false, err
	}
	return &workerConn{Conn: c, br: bufio.NewReaderSize(c, 4096), bw: bufio.NewWriterSize(c, 4096)}, false, nil
}
