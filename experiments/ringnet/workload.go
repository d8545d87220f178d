package ringnet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ringside/ringside/ring/client"
)

// Seed 002's write workload: a fixed pool of 7,885 key-value pairs,
// 16.5 MB in all, the same pool for every client.
const (
	PaperPairs   = 7885
	PaperPoolMiB = 16.5
)

type pair struct {
	key   string
	value []byte
}

// makePool draws n pairs whose values total about mib MiB, sizes uniform
// around the mean, all from seed.
func makePool(seed uint64, n int, mib float64) []pair {
	rng := rand.New(rand.NewPCG(seed, 0x9001))
	mean := int(mib * (1 << 20) / float64(n))
	pool := make([]pair, n)
	for i := range pool {
		size := 1 + rng.IntN(2*mean)
		v := make([]byte, size)
		for k := range v {
			v[k] = byte('a' + rng.IntN(26))
		}
		pool[i] = pair{key: fmt.Sprintf("kv-%05d", i), value: v}
	}
	return pool
}

// preload writes the whole pool through a smart client, 8 at a time.
func preload(ctx context.Context, addrs []string, pool []pair) error {
	c := client.New(addrs, true)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	next := make(chan pair)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				if err := c.Put(ctx, p.key, p.value); err != nil {
					select {
					case errs <- fmt.Errorf("preload %s: %w", p.key, err):
					default:
					}
				}
			}
		}()
	}
	for _, p := range pool {
		next <- p
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// background keeps writers going until stop is closed; it counts writes
// and failures.
type background struct {
	stop         chan struct{}
	wg           sync.WaitGroup
	mu           sync.Mutex
	writes, errs int
}

func startLoad(ctx context.Context, addrs []string, pool []pair, clients int, seed uint64) *background {
	b := &background{stop: make(chan struct{})}
	for w := range clients {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			c := client.New(addrs, true)
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for {
				select {
				case <-b.stop:
					return
				default:
				}
				p := pool[rng.IntN(len(pool))]
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := c.Put(cctx, p.key, p.value)
				cancel()
				b.mu.Lock()
				b.writes++
				if err != nil {
					b.errs++
				}
				b.mu.Unlock()
			}
		}()
	}
	return b
}

func (b *background) finish() (writes, errs int) {
	close(b.stop)
	b.wg.Wait()
	return b.writes, b.errs
}
