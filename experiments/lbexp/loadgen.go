package lbexp

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/ringside/ringside/balancer"
)

// shot is one request the load generator made.
type shot struct {
	client, seq int
	worker      string // from the X-Worker header; "" on failure
	start, lat  time.Duration
	status      int // 0: no response
}

// generate runs a closed loop: clients each send one GET at a time to
// urlFor(client, seq) until d has passed, and returns every request.
// The transport keeps a connection per client alive, as real load does.
func generate(ctx context.Context, clients int, d time.Duration, urlFor func(client, seq int) string) []shot {
	tr := balancer.NewTransport()
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t0 := time.Now()
	out := make([][]shot, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; ctx.Err() == nil; seq++ {
				s := shot{client: c, seq: seq, start: time.Since(t0)}
				req, _ := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodGet, urlFor(c, seq), nil)
				resp, err := hc.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					s.status, s.worker = resp.StatusCode, resp.Header.Get("X-Worker")
				}
				s.lat = time.Since(t0) - s.start
				out[c] = append(out[c], s)
			}
		}()
	}
	wg.Wait()
	var all []shot
	for _, o := range out {
		all = append(all, o...)
	}
	return all
}
