// Package serve runs a command's HTTP servers until it is told to stop,
// then shuts them down gracefully: the tail every ringside daemon shares.
package serve

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/ringside/ringside/internal/accept"
)

// Server is what Until runs: *http.Server, or a server of the same shape.
type Server interface {
	ListenAndServe() error
	Shutdown(ctx context.Context) error
}

// listenAndServe serves an *http.Server on a bounded listener
// (accept.Bound); other servers listen their own way.
func listenAndServe(srv Server) error {
	hs, ok := srv.(*http.Server)
	if !ok {
		return srv.ListenAndServe()
	}
	addr := hs.Addr
	if addr == "" {
		addr = ":http"
	}
	ln, err := accept.Listen(addr)
	if err != nil {
		return err
	}
	return hs.Serve(ln)
}

// Until serves every server until ctx ends, then gives in-flight requests
// grace to finish. A server that cannot serve (its address taken) ends
// them all and its error is returned.
func Until(ctx context.Context, grace time.Duration, srvs ...Server) error {
	errc := make(chan error, len(srvs))
	for _, srv := range srvs {
		go func() {
			if err := listenAndServe(srv); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	for _, srv := range srvs {
		srv.Shutdown(sctx)
	}
	return err
}
