// Package accept is the accept loop every server of ringside shares: a
// listener that runs out of file descriptors (EMFILE, ENFILE) or kernel
// buffers, or meets a connection aborted before it was accepted, backs
// off and tries again — a server under a connection flood keeps serving
// the connections it has and accepts again once descriptors free up. The
// loop ends only when the listener is closed or fails for good.
package accept

import (
	"errors"
	"log/slog"
	"net"
	"syscall"
	"time"
)

// Backoff bounds the wait between failed accepts: it starts at Min and
// doubles up to Max (net/http's server waits the same way).
const (
	Min = 5 * time.Millisecond
	Max = time.Second
)

// Loop accepts from ln and hands every connection to handle (which must
// not block: start a goroutine) until ln is closed or fails with an error
// that waiting cannot cure, and returns that error (net.ErrClosed once
// closed).
func Loop(ln net.Listener, log *slog.Logger, handle func(net.Conn)) error {
	p := Patient(ln, log)
	for {
		c, err := p.Accept()
		if err != nil {
			return err
		}
		handle(c)
	}
}

// Temporary reports whether an accept error passes with time: out of
// file descriptors or buffers, an aborted connection, a timeout.
func Temporary(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Patient returns ln with Accept waiting out temporary errors as Loop
// does, for servers that run their own accept loop and would end it on
// EMFILE (fasthttp's).
func Patient(ln net.Listener, log *slog.Logger) net.Listener { return patient{ln, log} }

type patient struct {
	net.Listener
	log *slog.Logger
}

func (p patient) Accept() (net.Conn, error) {
	wait := time.Duration(0)
	for {
		c, err := p.Listener.Accept()
		if err == nil || !Temporary(err) {
			return c, err
		}
		wait = min(max(2*wait, Min), Max)
		if p.log != nil {
			p.log.Warn("accept failed; retrying", "addr", p.Addr().String(), "err", err, "in", wait)
		}
		time.Sleep(wait)
	}
}
