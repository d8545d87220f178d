package ringnodes

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/client"
)

var (
	binOnce sync.Once
	bin     string
	binErr  error
)

func startLocal(t *testing.T, n int, args ...string) *Local {
	t.Helper()
	binOnce.Do(func() { bin, binErr = FindRingnode(context.Background()) })
	require.NoError(t, binErr)
	dir := t.TempDir()
	l, err := StartLocal(context.Background(), n, Options{Bin: bin, Dir: dir, Args: args})
	require.NoError(t, err)
	t.Cleanup(func() {
		l.Close()
		if t.Failed() {
			logs, _ := os.ReadDir(dir)
			for _, f := range logs {
				if b, err := os.ReadFile(dir + "/" + f.Name()); err == nil && !f.IsDir() {
					t.Logf("--- %s\n%s", f.Name(), b)
				}
			}
		}
	})
	return l
}

func maxUID(addrs []string) string {
	m := addrs[0]
	for _, a := range addrs {
		if ring.UIDOf(m).Less(ring.UIDOf(a)) {
			m = a
		}
	}
	return m
}

func without(addrs []string, drop ...string) []string {
	var out []string
	for _, a := range addrs {
		keep := true
		for _, d := range drop {
			keep = keep && a != d
		}
		if keep {
			out = append(out, a)
		}
	}
	return out
}

// oneCoordinator checks that exactly one live server claims the role and
// that it is the max live UID.
func oneCoordinator(t *testing.T, live []string) {
	t.Helper()
	ctx := context.Background()
	coord, err := WaitSettled(ctx, live, 15*time.Second)
	require.NoError(t, err)
	assert.Equal(t, maxUID(live), coord, "the new coordinator is the max live UID")
	sts, err := StatusAll(ctx, live)
	require.NoError(t, err)
	claims := 0
	for _, st := range sts {
		if st.Coordinator {
			claims++
		}
	}
	assert.Equal(t, 1, claims, "exactly one coordinator")
}

func TestKillCoordinatorDuringContinuousWrites(t *testing.T) {
	l := startLocal(t, 5)
	ctx := context.Background()
	coord, err := WaitSettled(ctx, l.Addrs(), 10*time.Second)
	require.NoError(t, err)

	var acked sync.Map
	var nAcked, nFailed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Half the writers use smart clients, half forward through a
			// server that is not the coordinator.
			c := client.New(without(l.Addrs(), coord)[w%4:w%4+1], w%2 == 0)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key, val := fmt.Sprintf("w%d-%d", w, i), fmt.Sprintf("v%d", rand.Int())
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				err := c.Put(cctx, key, []byte(val))
				cancel()
				if err == nil {
					acked.Store(key, val)
					nAcked.Add(1)
				} else {
					nFailed.Add(1)
				}
			}
		}()
	}
	more := func(n int64, what string) {
		t.Helper()
		want := nAcked.Load() + n
		require.Eventually(t, func() bool { return nAcked.Load() >= want }, 30*time.Second, 10*time.Millisecond, what)
	}
	more(50, "writes are acknowledged before the kill")
	require.NoError(t, l.Kill(ctx, coord))
	// Writes go on until the ring has a new coordinator and acknowledges
	// writes under it.
	_, err = WaitSettled(ctx, without(l.Addrs(), coord), 15*time.Second)
	require.NoError(t, err)
	more(50, "writes are acknowledged under the new coordinator")
	close(stop)
	wg.Wait()

	live := l.Addrs()
	oneCoordinator(t, live)
	require.Positive(t, nAcked.Load())
	t.Logf("acknowledged %d writes, %d failed during the failover", nAcked.Load(), nFailed.Load())
	reader := client.New(live, true)
	missing := 0
	acked.Range(func(k, v any) bool {
		got, err := reader.Get(ctx, k.(string))
		if err != nil || string(got) != v.(string) {
			missing++
			if missing < 5 {
				t.Errorf("acknowledged write %s=%s reads back %q, %v", k, v, got, err)
			}
		}
		return true
	})
	assert.Zero(t, missing, "every acknowledged write is readable")
}

func TestConcurrentInitiatorsWithDeadSuccessors(t *testing.T) {
	// No jitter, and the survivors frozen over the kill for longer than
	// the suspect timeout: they go on together with their detectors run
	// out, so several start elections at once; a second server dies with
	// the coordinator, so some initiators' successors are dead. Left to
	// the heartbeats, whether two detectors fired before the first
	// ELECTION arrived was up to the scheduler (a loaded CI machine spread
	// them out: six rings in a row had one initiator each). Should the
	// scheduler still run one survivor's ELECTION into the others before
	// their timers fire, up to six rings are tried; every one of them must
	// end with one coordinator.
	ctx := context.Background()
	most := 0
	for attempt := 0; attempt < 6 && most < 2; attempt++ {
		l := startLocal(t, 6, "--suspect-jitter", "0")
		coord, err := WaitSettled(ctx, l.Addrs(), 10*time.Second)
		require.NoError(t, err)
		other := maxUID(without(l.Addrs(), coord)) // the would-be successor coordinator
		survivors := without(l.Addrs(), coord, other)
		paused := make(chan error, len(survivors))
		for _, a := range survivors {
			go func() { paused <- l.Pause(ctx, a, 1500*time.Millisecond) }()
		}
		require.NoError(t, l.Kill(ctx, coord))
		require.NoError(t, l.Kill(ctx, other))
		for range survivors {
			require.NoError(t, <-paused)
		}
		live := l.Addrs()
		oneCoordinator(t, live)
		sts, _ := StatusAll(ctx, live)
		initiators := 0
		for _, st := range sts {
			if st.Events.Suspected > 0 {
				initiators++
			}
		}
		t.Logf("ring %d: %d servers started elections", attempt+1, initiators)
		most = max(most, initiators)
		l.Close()
	}
	assert.Greater(t, most, 1, "several servers started elections in one of the failovers")
}

func TestElectionMessageLostWithCrashedServer(t *testing.T) {
	l := startLocal(t, 4)
	ctx := context.Background()
	// A fifth server that dies the moment an ELECTION reaches it.
	addr, err := l.Add(ctx)
	require.NoError(t, err)
	require.NoError(t, WaitMembers(ctx, l.Addrs(), 5))
	require.NoError(t, l.Kill(ctx, addr))
	require.NoError(t, l.startWith(ctx, addr, "--fault-crash-on-election"))
	require.NoError(t, WaitMembers(ctx, l.Addrs(), 5))

	coord, err := WaitSettled(ctx, l.Addrs(), 10*time.Second)
	require.NoError(t, err)
	require.NotEqual(t, addr, coord, "the bootstrap server coordinates until a failover")
	require.NoError(t, l.Kill(ctx, coord))
	require.NoError(t, Poll(ctx, 10*time.Second, func() (bool, error) {
		return !contains(l.Addrs(), addr), nil
	}), "the faulty server crashed on the election message")
	oneCoordinator(t, l.Addrs())
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestBareRingTimesRoundTrips(t *testing.T) {
	for _, gap := range []time.Duration{0, 5 * time.Millisecond} {
		start := time.Now()
		rtts, err := BareRing(context.Background(), 4, 50, gap, 1, time.Millisecond, gap == 0)
		require.NoError(t, err)
		require.Len(t, rtts, 50)
		for _, d := range rtts {
			assert.Positive(t, d)
			assert.Less(t, d, time.Second, "four loopback hops")
		}
		assert.GreaterOrEqual(t, time.Since(start), 60*gap, "60 trips (10 to warm up), each after the gap")
	}
	_, err := BareRing(context.Background(), 1, 5, 0, 0, 0, false)
	assert.ErrorContains(t, err, "n=1")
	_, err = BareRing(context.Background(), 3, 5, 0, -1, 0, false)
	assert.ErrorContains(t, err, "warm=-1")
}
