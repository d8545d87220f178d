package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/ringside/ringside/ring/membership"
)

const transferChunk = 4 << 20

// rebalancer moves data after every metadata change: each key goes to the
// servers that became responsible for it, and a server that is no longer
// responsible forgets it once they have it. Replicas of a dead owner both
// push to the new replica; versions make the duplicate harmless.
//
// A move that fails is retried with backoff (100 ms doubling to 5 s) until
// it succeeds or the ring changes, which starts a new one: data a server
// is responsible for must not be left behind because one transfer failed.
func (s *Server) rebalancer(ctx context.Context) {
	var done *membership.Metadata
	backoff := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.rebal:
		}
		s.mu.RLock()
		cur := s.meta
		s.mu.RUnlock()
		if cur == nil || cur == done || !cur.Has(s.cfg.Addr) {
			continue
		}
		var moved int
		err := s.settle(ctx, cur)
		if err == nil {
			moved, err = s.moveData(ctx, done, cur)
		}
		s.moved.Add(int64(moved))
		if err != nil {
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
			s.m.moveRetries.Inc()
			s.log.Warn("data move incomplete; retrying", "version", cur.Version, "in", backoff, "err", err)
			time.AfterFunc(backoff, func() {
				select {
				case s.rebal <- struct{}{}:
				default:
				}
			})
			continue
		}
		backoff = 0
		done = cur
		s.rebalanced(cur)
		s.mu.Lock()
		s.events.RebalanceDone = time.Now().UnixNano()
		s.mu.Unlock()
	}
}

func (s *Server) moveData(ctx context.Context, old, cur *membership.Metadata) (int, error) {
	batches := map[string][]byte{}
	failed := map[string]error{}
	var forget []string
	// A key whose value cannot be read is neither sent nor forgotten: it
	// stays here, and the move is retried.
	unread, firstUnread := 0, error(nil)
	moved := 0
	flush := func(to string) {
		if len(batches[to]) == 0 || failed[to] != nil {
			return
		}
		if err := s.postTransfer(ctx, to, batches[to]); err != nil {
			failed[to] = err
		}
		batches[to] = batches[to][:0]
	}
	for _, key := range s.store.Keys() {
		now := cur.Responsible(key)
		var before []string
		if old != nil {
			before = old.Responsible(key)
		}
		readable := true
		for _, to := range now {
			if to == s.cfg.Addr || slices.Contains(before, to) {
				continue
			}
			e, ok, err := s.store.Get(key)
			if err != nil {
				if unread++; firstUnread == nil {
					firstUnread = err
				}
				readable = false
				break
			}
			if !ok {
				continue
			}
			batches[to] = AppendItem(batches[to], Item{Key: key, Entry: e})
			moved++
			if len(batches[to]) >= transferChunk {
				flush(to)
			}
		}
		if readable && !slices.Contains(now, s.cfg.Addr) {
			forget = append(forget, key)
		}
	}
	for to := range batches {
		flush(to)
	}
	for _, key := range forget {
		keep := false
		for _, to := range cur.Responsible(key) {
			keep = keep || failed[to] != nil
		}
		if !keep {
			if err := s.store.Forget(key); err != nil {
				return moved, err
			}
		}
	}
	for to, err := range failed {
		return moved, fmt.Errorf("transfer to %s: %w", to, err)
	}
	if unread > 0 {
		return moved, fmt.Errorf("%d keys kept unsent: %w", unread, firstUnread)
	}
	return moved, nil
}

func (s *Server) postTransfer(ctx context.Context, to string, body []byte) error {
	resp, err := s.peerRequest(ctx, http.MethodPost, to, "/internal/transfer", body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}
