package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/prometheus/procfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/agent/runtime"
	"github.com/ringside/ringside/agent/runtime/dockertest"
	"github.com/ringside/ringside/agent/score"
)

func TestDockerRuntimeLifecycleAndStats(t *testing.T) {
	d := dockertest.Pool(t)
	ctx := context.Background()
	half, err := d.Start(ctx, runtime.Spec{CPULimit: 0.5, Default: true})
	require.NoError(t, err)
	one, err := d.Start(ctx, runtime.Spec{CPULimit: 1, MemoryMB: 64})
	require.NoError(t, err)

	list, err := d.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	byID := map[string]runtime.Instance{}
	for _, in := range list {
		byID[in.ID] = in
	}
	assert.Equal(t, 0.5, byID[half.ID].CPULimit)
	assert.True(t, byID[half.ID].Default)
	assert.Equal(t, 1.0, byID[one.ID].CPULimit)
	assert.False(t, byID[one.ID].Default)

	// Load the half-CPU worker; its usage, normalised by its limit, rises
	// towards 100 %.
	s0, err := d.Sample(ctx, half)
	require.NoError(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Get("http://" + half.Addr + "/work?cost=200000")
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	// Sampled window by window until one reads the container saturated: a
	// busy machine may starve a window, never push usage past the limit.
	var u score.Usage
	var over []score.Usage
	prev := s0
	require.Eventually(t, func() bool {
		s1, err := d.Sample(ctx, half)
		if err != nil || s1.At.Sub(prev.At) < 300*time.Millisecond {
			return false
		}
		u, prev = score.Between(prev, s1), s1
		if u.CPU > 100 {
			over = append(over, u)
		}
		return u.CPU > 60 && u.NetMBps > 0
	}, 30*time.Second, 100*time.Millisecond, "a saturated half-CPU container reads near 100 %% of its limit, and requests cross its interface: last %+v", u)
	close(stop)
	wg.Wait()
	assert.Empty(t, over, "never past the limit")

	s2, err := d.Sample(ctx, one)
	require.NoError(t, err)
	assert.Equal(t, uint64(64<<20), s2.MemLimit)
	assert.Greater(t, score.Memory(s2), 0.0)

	require.NoError(t, d.Stop(ctx, one.ID))
	list, err = d.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, half.ID, list[0].ID)
	require.NoError(t, d.Stop(ctx, one.ID), "stopping a gone worker is not an error")
}

func TestParseSpecs(t *testing.T) {
	sp, err := runtime.ParseSpecs("1:default, 0.5")
	require.NoError(t, err)
	assert.Equal(t, []runtime.Spec{{CPULimit: 1, Default: true}, {CPULimit: 0.5}}, sp)
	for _, bad := range []string{"", "x", "0", "1:always", "-1"} {
		_, err := runtime.ParseSpecs(bad)
		assert.Error(t, err, bad)
	}
}

// SetCPULimit slows a running worker from outside, on both runtimes. A
// limit is a ceiling on the worker's share of a CPU, and contention from
// other processes can only push that share lower, so the ceiling is checked
// on CPU time per second of wall time under a steady CPU-bound load instead
// of timing requests (which a busy machine slows either way). Whether the
// limit holds the worker down, and no longer does once lifted, is asked of
// what enforces it. A container's quota is the engine's to keep and the
// kernel's to enforce: the engine must hold the limit asked for, and the
// kernel must count periods the quota ran out in (its throttling data) at a
// fifth of a CPU and (almost) none at a whole one. How many at a fifth is
// the machine's to say: a worker a busy machine gives less than its quota
// runs out of it in few periods (0.17 of them in CI beside the kind
// cluster, where its share at 1 CPU read 0.26, no more than a 0.2 limit
// lets through plus a margin), so windows are taken until one shows it. A
// worker process's quota is the runtime's own stop and continue, so there
// it is the worker's own share: CPU time per second it did not spend
// waiting for a CPU (beside six busy loops an unlimited worker process got
// 0.14 of a CPU).
func TestSetCPULimitSlowsAWorker(t *testing.T) {
	ctx := context.Background()
	type throttler interface {
		Start(context.Context, runtime.Spec) (runtime.Instance, error)
		SetCPULimit(context.Context, string, float64) error
		Sample(context.Context, runtime.Instance) (score.Sample, error)
	}
	// A worker the throttle left stopped fails the request, not the run.
	hc := &http.Client{Timeout: 10 * time.Second}
	// usage is one window of steady load: CPU used per second of wall
	// time, per second not spent waiting for a CPU (with a pid to read run
	// delays from), and the share of the quota's periods it ran out in
	// (with a container's throttling data).
	type usage struct{ wall, own, held float64 }
	bin := dockertest.WorkerBinary(t)
	proc := runtime.NewProcess(bin)
	defer proc.RemoveAll(ctx)
	docker := dockertest.Pool(t)
	for _, c := range []struct {
		name string
		rt   throttler
		// pid is the worker's process, for its run delays (nil: none).
		pid func(runtime.Instance) int
		// periods counts the quota's periods and those it ran out in, and
		// limit is the limit the runtime's keeper holds, in CPUs (nil: the
		// runtime has neither).
		periods func(runtime.Instance) (all, throttled uint64)
		limit   func(runtime.Instance) float64
	}{
		{"docker", docker, nil, func(w runtime.Instance) (uint64, uint64) {
			return throttling(t, docker, w.ID)
		}, func(w runtime.Instance) float64 {
			res, err := docker.Client().ContainerInspect(ctx, w.ID, client.ContainerInspectOptions{})
			require.NoError(t, err)
			return float64(res.Container.HostConfig.NanoCPUs) / 1e9
		}},
		{"process", proc, func(w runtime.Instance) int {
			pid, err := strconv.Atoi(w.ID)
			require.NoError(t, err)
			return pid
		}, nil, nil},
	} {
		name, rt := c.name, c.rt
		// share keeps the worker busy for a second and a half.
		share := func(w runtime.Instance) usage {
			before, err := rt.Sample(ctx, w)
			require.NoError(t, err)
			var waited time.Duration
			var pid int
			if c.pid != nil {
				pid = c.pid(w)
				waited = -runDelay(t, pid)
			}
			var periods, throttled uint64
			if c.periods != nil {
				periods, throttled = c.periods(w)
			}
			start := time.Now()
			for time.Since(start) < 1500*time.Millisecond {
				resp, err := hc.Get("http://" + w.Addr + "/work?cost=1000000") // ~75 ms of CPU
				require.NoError(t, err)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			after, err := rt.Sample(ctx, w)
			require.NoError(t, err)
			elapsed, cpu := time.Since(start), time.Duration(after.CPUTotal-before.CPUTotal)
			u := usage{wall: float64(cpu) / float64(elapsed)}
			u.own = u.wall
			if pid != 0 {
				// The delays of threads that waited at once add up, so the
				// time left is never taken below the CPU time used.
				waited += runDelay(t, pid)
				u.own = float64(cpu) / float64(max(elapsed-waited, cpu, 1))
			}
			if c.periods != nil {
				p, th := c.periods(w)
				u.held = float64(th-throttled) / float64(max(p-periods, 1))
			}
			return u
		}
		w, err := rt.Start(ctx, runtime.Spec{CPULimit: 1})
		require.NoError(t, err, name)
		require.Eventually(t, func() bool {
			resp, err := http.Get("http://" + w.Addr + "/healthz")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil
		}, 10*time.Second, 20*time.Millisecond, "%s: the worker answers", name)
		// windows takes windows of load, for up to 20 s, until one shows
		// what is asked: a busy machine may hold a worker down for a while,
		// and the window after an update may still hold a period of the old
		// quota.
		windows := func(shows func(usage) bool) usage {
			deadline := time.Now().Add(20 * time.Second)
			for {
				u := share(w)
				if shows(u) || time.Now().After(deadline) {
					return u
				}
			}
		}
		report := func(u usage) string {
			if c.periods != nil {
				return fmt.Sprintf("CPU share %.2f, quota out in %.2f of its periods", u.wall, u.held)
			}
			return fmt.Sprintf("CPU share %.2f, its own %.2f", u.wall, u.own)
		}
		require.NoError(t, rt.SetCPULimit(ctx, w.ID, 0.2), name)
		held := func(usage) bool { return true }
		if c.periods != nil {
			assert.InDelta(t, 0.2, c.limit(w), 1e-9, "%s: the limit the engine holds", name)
			held = func(u usage) bool { return u.held > 0 }
		}
		limited := windows(held)
		// 0.3: the process runtime's quota overshoots by its timers' slack.
		assert.Less(t, limited.wall, 0.3, "%s: at a fifth of a CPU the worker used %.2f", name, limited.wall)
		assert.Greater(t, limited.own, 0.05, "%s: at a fifth of a CPU the worker still works (%.2f)", name, limited.own)
		assert.True(t, held(limited), "%s: at a fifth of a CPU the quota never ran out in 20 s (%s)", name, report(limited))
		require.NoError(t, rt.SetCPULimit(ctx, w.ID, 1), name)
		lifted := func(u usage) bool { return u.held < 0.05 }
		if c.periods != nil {
			assert.InDelta(t, 1, c.limit(w), 1e-9, "%s: the limit the engine holds, lifted", name)
		} else {
			// Its own share must pass 0.3, the most the 0.2 limit ever let
			// through, and a quarter more than the limited window's —
			// unless it passes half a CPU: a limit the machine's load kept
			// from binding leaves nothing to rise from.
			want := min(0.5, max(0.3, 1.25*limited.own))
			lifted = func(u usage) bool { return u.own > want }
		}
		full := windows(lifted)
		t.Logf("%s: at a limit of 0.2 %s; at 1 %s", name, report(limited), report(full))
		assert.True(t, lifted(full), "%s: back at a whole CPU the limit still holds the worker down (%s in its last window, 20 s on; limited %s)", name, report(full), report(limited))
		for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1), 65} {
			assert.ErrorContains(t, rt.SetCPULimit(ctx, w.ID, bad), "cpu limit", "%s: %v", name, bad)
		}
	}
}

// throttling reads a container's CFS periods and how many of them its
// quota ran out in, from the engine's stats.
func throttling(t *testing.T, d *runtime.Docker, id string) (periods, throttled uint64) {
	t.Helper()
	res, err := d.Client().ContainerStats(context.Background(), id, client.ContainerStatsOptions{})
	require.NoError(t, err)
	defer res.Body.Close()
	var st container.StatsResponse
	require.NoError(t, json.NewDecoder(res.Body).Decode(&st))
	td := st.CPUStats.ThrottlingData
	return td.Periods, td.ThrottledPeriods
}

// runDelay is how long the threads of process pid have waited on a
// runqueue for a CPU, from each thread's schedstat. A stopped (SIGSTOP)
// thread is off the runqueue and adds nothing; a container's threads
// throttled by its CPU quota stay on it and do.
func runDelay(t *testing.T, pid int) time.Duration {
	t.Helper()
	threads, err := procfs.AllThreads(pid)
	require.NoError(t, err)
	require.NotEmpty(t, threads, "process %d: no threads in /proc", pid)
	var sum time.Duration
	for _, th := range threads {
		st, err := th.Schedstat()
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread ended since the listing
		}
		require.NoError(t, err, "process %d, thread %d", pid, th.PID)
		sum += time.Duration(st.WaitingNanoseconds)
	}
	return sum
}
