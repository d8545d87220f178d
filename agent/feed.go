package agent

import (
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/ringside/ringside/internal/weightfeed"
)

// Feed is the websocket server of the weight feed (DESIGN §3.3): every
// connected balancer gets each published queue, and its tallies reach
// onTally. A connection must present the shared token, and a browser's
// Origin must be this host or an allowed one.
type Feed struct {
	token    string
	origins  []string
	onTally  func(weightfeed.Tally) error
	log      *slog.Logger
	upgrader websocket.Upgrader

	mu     sync.Mutex
	conns  map[chan []byte]struct{}
	latest []byte

	rejected atomic.Uint64
}

// NewFeed returns a feed; an empty token is refused by the caller's flag
// checks, not here, so tests can see what an open feed would do.
func NewFeed(token string, origins []string, onTally func(weightfeed.Tally) error, log *slog.Logger) *Feed {
	f := &Feed{token: token, origins: origins, onTally: onTally, log: log, conns: map[chan []byte]struct{}{}}
	f.upgrader = websocket.Upgrader{CheckOrigin: f.checkOrigin, HandshakeTimeout: 5 * time.Second}
	return f
}

// checkOrigin lets through clients that send no Origin (balancers are not
// browsers), the agent's own host, and the configured origins.
func (f *Feed) checkOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil {
		return false
	}
	return strings.EqualFold(u.Host, r.Host) || slices.Contains(f.origins, o)
}

// authorised takes the token from the Authorization header only: a URL's
// query lands in access logs, proxies' logs and browser history.
func (f *Feed) authorised(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && f.token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(f.token)) == 1
}

// Rejected counts tally messages that failed validation.
func (f *Feed) Rejected() uint64 { return f.rejected.Load() }

// Clients is the number of connected balancers.
func (f *Feed) Clients() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}

// Publish sends m to every balancer. A slow balancer misses intermediate
// queues, never the latest one.
func (f *Feed) Publish(m weightfeed.Weights) {
	b, err := json.Marshal(m)
	if err != nil {
		f.log.Error("encode weights", "err", err)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.latest = b
	for ch := range f.conns {
		select {
		case <-ch: // drop the stale queue
		default:
		}
		ch <- b
	}
}

func (f *Feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !f.authorised(r) {
		http.Error(w, "weight feed: missing or wrong token", http.StatusUnauthorized)
		return
	}
	conn, err := f.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered (403 for a foreign Origin)
	}
	defer conn.Close()
	conn.SetReadLimit(1 << 20)
	ch := make(chan []byte, 1)
	f.mu.Lock()
	if f.latest != nil {
		ch <- f.latest
	}
	f.conns[ch] = struct{}{}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.conns, ch)
		f.mu.Unlock()
	}()
	f.log.Info("balancer connected", "remote", r.RemoteAddr)

	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, raw, err := conn.ReadMessage()
			if err != nil {
				return
			}
			rep, err := weightfeed.DecodeTally(raw)
			if err == nil {
				err = f.onTally(rep)
			}
			if err != nil {
				f.rejected.Add(1)
				f.log.Warn("balancer tally rejected", "remote", r.RemoteAddr, "err", err)
			}
		}
	}()
	for {
		select {
		case b := <-ch:
			conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
			if err := conn.WriteMessage(websocket.TextMessage, b); err != nil {
				return
			}
		case <-done:
			return
		}
	}
}
