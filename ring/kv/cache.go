package kv

import (
	"math"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// valueCache keeps recently read and written values in memory up to a
// budget in bytes (keys and values alike), evicting the least recently
// used. A bound by count alone let 10,000 values of 16 MiB each claim
// 160 GB; a value larger than the whole budget is simply not cached.
type valueCache struct {
	mu    sync.Mutex // Get runs under the store's read lock, concurrently
	lru   *simplelru.LRU[string, []byte]
	bytes int64
	max   int64
}

func newValueCache(maxBytes int64) *valueCache {
	c := &valueCache{max: maxBytes}
	c.lru, _ = simplelru.NewLRU(math.MaxInt, func(k string, v []byte) { c.bytes -= cost(k, v) })
	return c
}

func cost(k string, v []byte) int64 { return int64(len(k) + len(v)) }

func (c *valueCache) Get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Get(key)
}

func (c *valueCache) Add(key string, v []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(key)
	if cost(key, v) > c.max {
		return
	}
	c.lru.Add(key, v)
	c.bytes += cost(key, v)
	for c.bytes > c.max {
		c.lru.RemoveOldest()
	}
}

func (c *valueCache) Remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(key)
}

// size is the bytes cached now.
func (c *valueCache) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
