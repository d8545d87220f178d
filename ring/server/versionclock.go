package server

import (
	"sync"
	"time"
)

// versionClock hands out entry versions: wall-clock nanoseconds, strictly
// increasing per server, and above the version being replaced. A new owner
// after a failover runs on the same clock family, so its versions follow
// the old owner's.
type versionClock struct {
	mu   sync.Mutex
	last uint64
}

func (c *versionClock) next(above uint64) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := max(uint64(time.Now().UnixNano()), c.last+1, above+1)
	c.last = v
	return v
}
