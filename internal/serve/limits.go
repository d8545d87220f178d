package serve

import (
	"net/http"
	"time"
)

// The bounds every daemon's HTTP server puts on a client: a head or body
// sent slowly, an answer read slowly and a kept-alive connection left idle
// are cut off, so a hostile or stuck client holds a connection (and the
// memory behind it) for a bounded time. Variables so that tests can
// shorten them.
var (
	ReadHeaderTimeout = 5 * time.Second
	// ReadTimeout covers the whole request, body included: a body
	// trickled byte by byte is cut off. Far above what the largest body
	// (a 16 MiB value, a data move) takes on any network in use.
	ReadTimeout  = time.Minute
	WriteTimeout = time.Minute
	IdleTimeout  = 2 * time.Minute
	// MaxHeaderBytes bounds a request head: no client of these servers
	// sends more than a few hundred bytes.
	MaxHeaderBytes = 64 << 10
)

// Limit gives srv the bounds above where it has none of its own. A
// websocket handler that hijacks its connection sets deadlines of its own
// (gorilla's Upgrade clears the server's).
func Limit(srv *http.Server) *http.Server {
	if srv.ReadHeaderTimeout == 0 {
		srv.ReadHeaderTimeout = ReadHeaderTimeout
	}
	if srv.ReadTimeout == 0 {
		srv.ReadTimeout = ReadTimeout
	}
	if srv.WriteTimeout == 0 {
		srv.WriteTimeout = WriteTimeout
	}
	if srv.IdleTimeout == 0 {
		srv.IdleTimeout = IdleTimeout
	}
	if srv.MaxHeaderBytes == 0 {
		srv.MaxHeaderBytes = MaxHeaderBytes
	}
	return srv
}
