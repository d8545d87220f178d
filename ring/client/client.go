// Package client talks to a ringnode ring. A forwarding client sends every
// request to one server, which forwards it to the key's owner; a smart
// client knows the ring metadata and goes straight to the owner, fetching
// fresh metadata when the ring changes under it.
package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/ringside/ringside/ring/kv"
	"github.com/ringside/ringside/ring/membership"
)

// ErrNotFound is returned by Get for an absent key.
var ErrNotFound = errors.New("key not found")

// Client is safe for concurrent use.
type Client struct {
	hc      *http.Client
	servers []string
	smart   bool

	mu   sync.RWMutex
	meta *membership.Metadata
}

// New returns a client. A forwarding client (smart false) uses servers[0]
// and moves to the next one when it fails; a smart client uses servers to
// fetch ring metadata.
func New(servers []string, smart bool) *Client {
	return &Client{
		hc: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			MaxIdleConnsPerHost: 256, DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}},
		servers: servers, smart: smart,
	}
}

// Refresh fetches the ring metadata from the first server that answers.
func (c *Client) Refresh(ctx context.Context) error {
	var last error
	for _, s := range c.candidates() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s+"/internal/ring", nil)
		if err != nil {
			last = fmt.Errorf("%s: %w", s, err)
			continue
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("%s: %s %v", s, resp.Status, err)
			continue
		}
		m, err := membership.Decode(b)
		if err != nil {
			last = err
			continue
		}
		c.mu.Lock()
		if m.Newer(c.meta) {
			c.meta = m
		}
		c.mu.Unlock()
		return nil
	}
	return fmt.Errorf("refresh ring metadata: %w", last)
}

func (c *Client) candidates() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.meta == nil {
		return c.servers
	}
	return append(append([]string(nil), c.meta.Servers...), c.servers...)
}

func (c *Client) target(key string, attempt int) string {
	if !c.smart {
		return c.servers[attempt%len(c.servers)]
	}
	c.mu.RLock()
	m := c.meta
	c.mu.RUnlock()
	if m == nil {
		return c.servers[attempt%len(c.servers)]
	}
	return m.Owner(key)
}

// retryable reports whether a failed attempt may succeed elsewhere or later.
func retryable(code int) bool {
	return code == http.StatusServiceUnavailable || code == http.StatusBadGateway
}

// Retries: a 502, a 503 or a transport failure may pass elsewhere or a
// moment later (an owner whose lease a loaded machine let lapse renews it
// within a suspect timeout; a ring that elects settles its metadata), so
// the request is sent again with a capped exponential backoff until ctx
// ends. The servers' Retry-After of one second is the coarsest the header
// can say, longer than such a lapse lasts; the backoff reaches its cap
// sooner. A ctx without a deadline bounds the retries by count instead.
const (
	firstBackoff            = 20 * time.Millisecond
	maxBackoff              = 500 * time.Millisecond
	attemptsWithoutDeadline = 8
)

// backoff is the pause before attempt (1-based for the first retry).
func backoff(attempt int) time.Duration {
	d := firstBackoff << min(attempt-1, 10)
	return min(d, maxBackoff)
}

// do sends one request, retrying on a failed server or a changing ring.
// A retried write is still one operation to a linearizability checker:
// every attempt writes the same value, and whichever take effect do so
// between the first send and the last answer.
func (c *Client) do(ctx context.Context, method, key string, body []byte) ([]byte, error) {
	if c.smart {
		c.mu.RLock()
		known := c.meta != nil
		c.mu.RUnlock()
		if !known {
			if err := c.Refresh(ctx); err != nil {
				return nil, err
			}
		}
	}
	_, bounded := ctx.Deadline()
	var last error
	for attempt := 0; bounded || attempt < attemptsWithoutDeadline; attempt++ {
		if attempt > 0 {
			if c.smart {
				c.Refresh(ctx)
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("%w after %d attempts; the last: %w", ctx.Err(), attempt, last)
			case <-time.After(backoff(attempt)):
			}
		}
		to := c.target(key, attempt)
		req, err := http.NewRequestWithContext(ctx, method, "http://"+to+"/kv/"+kv.EscapeKey(key), bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		// A server's answer is a value at most; a longer one is not a
		// ringnode's, and memory per request stays bounded.
		b, err := io.ReadAll(io.LimitReader(resp.Body, kv.MaxValueLen+1))
		resp.Body.Close()
		if err == nil && len(b) > kv.MaxValueLen {
			return nil, fmt.Errorf("%s %s via %s: an answer over %d bytes, longer than any value", method, key, to, kv.MaxValueLen)
		}
		switch {
		case err != nil:
			last = err
		case resp.StatusCode == http.StatusNotFound:
			return nil, ErrNotFound
		case resp.StatusCode < 300:
			return b, nil
		case retryable(resp.StatusCode):
			last = fmt.Errorf("%s %s via %s: %s: %s", method, key, to, resp.Status, bytes.TrimSpace(b))
		default:
			return nil, fmt.Errorf("%s %s via %s: %s: %s", method, key, to, resp.Status, bytes.TrimSpace(b))
		}
	}
	return nil, fmt.Errorf("after %d attempts: %w", attemptsWithoutDeadline, last)
}

// Put stores value under key; nil means the write was acknowledged by the
// owner after replication.
func (c *Client) Put(ctx context.Context, key string, value []byte) error {
	_, err := c.do(ctx, http.MethodPut, key, value)
	return err
}

// Get returns the value of key or ErrNotFound.
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	return c.do(ctx, http.MethodGet, key, nil)
}

// Delete removes key.
func (c *Client) Delete(ctx context.Context, key string) error {
	_, err := c.do(ctx, http.MethodDelete, key, nil)
	return err
}
