package leaderapp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// SmartClient is the paper's "smart write" client: it asks the sidecars
// who leads and sends writes straight to the leader, asking again when the
// answer no longer holds (503 or a replica that is not the leader).
type SmartClient struct {
	Sidecars []string          // sidecar base URLs, asked in turn
	Peers    map[string]string // replica name → base URL
	HC       *http.Client

	mu     sync.Mutex
	leader string // base URL of the leader last named
	next   int
}

// ErrNoLeader: no sidecar named a known replica as leader.
var ErrNoLeader = errors.New("no sidecar names a leader")

func (c *SmartClient) leaderURL(ctx context.Context) (string, error) {
	c.mu.Lock()
	if c.leader != "" {
		defer c.mu.Unlock()
		return c.leader, nil
	}
	start := c.next
	c.mu.Unlock()
	var errs []error
	for i := range c.Sidecars {
		sc := c.Sidecars[(start+i)%len(c.Sidecars)]
		ans, err := AskSidecar(ctx, c.HC, sc)
		name := ans.Name
		if err == nil && c.Peers[name] != "" {
			c.mu.Lock()
			c.leader, c.next = c.Peers[name], start+i+1
			c.mu.Unlock()
			return c.Peers[name], nil
		}
		if err == nil {
			err = fmt.Errorf("sidecar %s names %q", sc, name)
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("%w: %v", ErrNoLeader, errors.Join(errs...))
}

func (c *SmartClient) forget(base string) {
	c.mu.Lock()
	if c.leader == base {
		c.leader = ""
	}
	c.mu.Unlock()
}

// Put writes key at the leader and returns the write's sequence number.
// A write that does not reach a replica that leads is retried until ctx
// ends; the error of the last try is returned then.
func (c *SmartClient) Put(ctx context.Context, key string, val []byte) (uint64, error) {
	var last error
	for ctx.Err() == nil {
		base, err := c.leaderURL(ctx)
		if err == nil {
			var seq uint64
			if seq, err = c.put(ctx, base, key, val); err == nil {
				return seq, nil
			}
			c.forget(base)
		}
		last = err
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	return 0, errors.Join(ctx.Err(), last)
}

func (c *SmartClient) put(ctx context.Context, base, key string, val []byte) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/kv/"+url.PathEscape(key), bytes.NewReader(val))
	if err != nil {
		return 0, err
	}
	resp, err := c.HC.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusNoContent {
		return 0, fmt.Errorf("put at %s: %s: %s", base, resp.Status, bytes.TrimSpace(b))
	}
	seq, err := strconv.ParseUint(resp.Header.Get(HeaderSeq), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("put at %s: acknowledged without a sequence number: %w", base, err)
	}
	if resp.Header.Get(HeaderRole) != string(Leader) {
		c.forget(base) // a follower forwarded it: ask who leads now
	}
	return seq, nil
}
