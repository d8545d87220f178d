package balancer

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/ringside/ringside/internal/weightfeed"
)

// FeedOptions configure Follow.
type FeedOptions struct {
	URL    string // ws://agent:8081/feed
	Token  string // the agent's shared token
	Origin string // sent as Origin; the agent checks it
	Name   string // this balancer's name in its tallies
	// TallyEvery is how often the balancer sends the agent its tally (default 1 s).
	TallyEvery time.Duration
	// MaxBackoff caps the reconnect delay (default 5 s).
	MaxBackoff time.Duration
	// The feed names the workers, and whoever holds the token can name
	// any address: a loopback one (a service of this host that is no
	// worker) is refused unless AllowLoopback, and an address of the
	// balancer's own (Self: it would proxy to itself, each request again,
	// without end) always is.
	AllowLoopback bool
	Self          []string
}

// checkAddrs refuses the workers the feed may not name (FeedOptions).
func (o FeedOptions) checkAddrs(m weightfeed.Weights) error {
	for _, w := range m.Workers {
		if slices.Contains(o.Self, w.Addr) {
			return fmt.Errorf("worker %s: the address is this balancer's own", w.Addr)
		}
		host, _, err := net.SplitHostPort(w.Addr)
		if err != nil {
			return fmt.Errorf("worker %s: %w", w.Addr, err)
		}
		ip, err := netip.ParseAddr(host)
		loopback := strings.EqualFold(host, "localhost") || (err == nil && (ip.IsLoopback() || ip.IsUnspecified()))
		if loopback && !o.AllowLoopback {
			return fmt.Errorf("worker %s: a loopback address from the feed is refused (the balancer's --allow-loopback admits it)", w.Addr)
		}
	}
	return nil
}

// Follow keeps b's table in step with the agent's weight feed until ctx
// ends. A rejected message is logged and the last good table stays; a lost
// connection keeps the table and redials with jittered exponential backoff.
func (b *Balancer) Follow(ctx context.Context, o FeedOptions) {
	if o.TallyEvery <= 0 {
		o.TallyEvery = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		connected, err := b.followOnce(ctx, o)
		if ctx.Err() != nil {
			return
		}
		if connected {
			backoff = 100 * time.Millisecond
		}
		b.log.Warn("weight feed lost; keeping the last table", "url", o.URL, "err", err, "retry_in", backoff)
		if !waitCtx(ctx, backoff/2+rand.N(backoff/2+1)) {
			return
		}
		backoff = min(2*backoff, o.MaxBackoff)
	}
}

func (b *Balancer) followOnce(ctx context.Context, o FeedOptions) (connected bool, err error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+o.Token)
	if o.Origin != "" {
		h.Set("Origin", o.Origin)
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, resp, err := websocket.DefaultDialer.DialContext(dctx, o.URL, h)
	cancel()
	if err != nil {
		if resp != nil {
			return false, fmt.Errorf("dial %s: %w (HTTP %d)", o.URL, err, resp.StatusCode)
		}
		return false, fmt.Errorf("dial %s: %w", o.URL, err)
	}
	defer conn.Close()
	b.log.Info("weight feed connected", "url", o.URL)
	conn.SetReadLimit(1 << 20)

	// One writer: tallies go out from here; the read loop below only reads.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		tick := time.NewTicker(o.TallyEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
				conn.Close()
				return
			case <-tick.C:
				raw, _ := json.Marshal(b.Tally(o.Name))
				conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
				if err := conn.WriteMessage(websocket.TextMessage, raw); err != nil {
					conn.Close()
					return
				}
			}
		}
	}()
	for first := true; ; first = false {
		// The agent pushes every second; silence for much longer means it
		// is gone even if TCP has not noticed.
		conn.SetReadDeadline(time.Now().Add(10 * o.TallyEvery))
		_, raw, err := conn.ReadMessage()
		if err != nil {
			return true, err
		}
		m, err := weightfeed.DecodeWeights(raw)
		if err == nil {
			err = o.checkAddrs(m)
		}
		if err == nil {
			err = b.install(m, !first)
		}
		if err != nil {
			b.feedRejected.Add(1)
			b.log.Warn("weight feed message rejected; the last good table stays", "err", err)
			continue
		}
		b.feedAccepted.Add(1)
	}
}

// waitCtx sleeps d or until ctx ends, reporting whether ctx is still live.
func waitCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
