package k8s_test

import (
	"context"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ringside/ringside/agent"
	"github.com/ringside/ringside/agent/lifecycle"
	"github.com/ringside/ringside/agent/runtime"
	"github.com/ringside/ringside/agent/score"
	"github.com/ringside/ringside/experiments/backend/ringnodes"
	"github.com/ringside/ringside/internal/browsertest"
	"github.com/ringside/ringside/internal/imagebuild"
	"github.com/ringside/ringside/k8s/kindrun"
)

const kindWorkerImage = "ringside/worker:kind-test"

// The agent's Kubernetes runtime on real Pods: workers of two shapes
// started as Deployments, listed with their CPU limits; a saturated
// worker's CPU% from two kubelet samples agrees with the kubelet's own
// figure within 2 percentage points, and the dashboard (in Chromium) shows
// it; a sundown removes exactly the chosen
// Pod of a Deployment of two; a throttle resizes a Pod in place.
func agentRuntimeOnKind(ctx context.Context, t *testing.T, kind *kindrun.Kind, cluster string, cs kubernetes.Interface) {
	require.NoError(t, imagebuild.Build(ctx, kindWorkerImage, "github.com/ringside/ringside/cmd/worker"))
	require.NoError(t, kind.Load(ctx, cluster, kindWorkerImage))
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ringside-agent-", Labels: ringnodes.ManagedBy}}, metav1.CreateOptions{})
	require.NoError(t, err)
	defer cs.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), ns.Name, metav1.DeleteOptions{})
	rt := runtime.NewKube(cs, runtime.KubeOptions{Namespace: ns.Name, Image: kindWorkerImage, Pool: "kind-test"})

	big, err := rt.Start(ctx, runtime.Spec{CPULimit: 0.5, Default: true})
	require.NoError(t, err)
	small1, err := rt.Start(ctx, runtime.Spec{CPULimit: 0.25})
	require.NoError(t, err)
	small2, err := rt.Start(ctx, runtime.Spec{CPULimit: 0.25})
	require.NoError(t, err)
	list, err := rt.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 3)
	limits := map[string]float64{}
	for _, in := range list {
		limits[in.ID] = in.CPULimit
		assert.Equal(t, in.ID == big.ID, in.Default, in.ID)
	}
	assert.Equal(t, map[string]float64{big.ID: 0.5, small1.ID: 0.25, small2.ID: 0.25}, limits)

	// Saturate the big worker through the API server's Pod proxy (Pod
	// addresses are the cluster's): each request ~300 ms of CPU, four at a
	// time against half a CPU.
	loadCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	loadStart := time.Now()
	for range 6 {
		wg.Go(func() {
			for loadCtx.Err() == nil {
				cs.CoreV1().Pods(ns.Name).ProxyGet("http", big.ID, "8080", "/work", map[string]string{"cost": "4000000"}).DoRaw(loadCtx)
			}
		})
	}
	defer func() { stop(); wg.Wait() }()
	// The agent's CPU% over 10 s and more under load, against the same
	// window read the way metrics-server (kubectl top) reads the kubelet:
	// its cumulative CPU seconds at its own millisecond timestamps, fetched
	// here apart from the agent. The Summary's usageNanoCores, the
	// kubelet's rate over its last interval only, is logged beside.
	node := nodeOf(ctx, t, cs, ns.Name, big.ID)
	// The kubelet publishes a new figure every few seconds; the agent's
	// sample (cached for half a second) and a read of our own rarely fall
	// on the same one back to back on a loaded machine, so every figure
	// either side saw is kept by its timestamp and the window is the
	// first and last timestamps both saw.
	var mu sync.Mutex
	kubeletCPU := map[time.Time]float64{}
	agentSamples := map[time.Time]score.Sample{}
	var lastErr error
	window := func() (first, last time.Time) {
		for at := range agentSamples {
			if _, ok := kubeletCPU[at]; !ok || !at.After(loadStart.Add(3*time.Second)) {
				continue
			}
			if first.IsZero() || at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
		}
		return first, last
	}
	ok := assert.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		if mf, err := runtime.NodeMetrics(ctx, cs, node); err != nil {
			lastErr = err
		} else if v, at, ok := runtime.ContainerMetric(mf, "container_cpu_usage_seconds_total", ns.Name, big.ID, "worker"); ok {
			kubeletCPU[at] = v
		}
		if s, err := rt.Sample(ctx, big); err != nil {
			lastErr = err
		} else {
			agentSamples[s.At] = s
		}
		first, last := window()
		return !first.IsZero() && last.Sub(first) >= 10*time.Second
	}, 3*time.Minute, 250*time.Millisecond, "the kubelet's figures advance")
	if !ok {
		mu.Lock() // the condition may still be running
		defer mu.Unlock()
		t.Fatalf("%d figures read from the kubelet, %d by the agent, no 10 s window both saw; last error: %v", len(kubeletCPU), len(agentSamples), lastErr)
	}
	t0, t1 := window() // the condition has returned: no lock needed
	first, last := agentSamples[t0], agentSamples[t1]
	k0, k1 := kubeletCPU[t0], kubeletCPU[t1]
	u := score.Between(first, last)
	kubelet := min(100, (k1-k0)/t1.Sub(t0).Seconds()/0.5*100)
	var instant float64
	if sum, err := runtime.NodeSummary(ctx, cs, node); err == nil {
		if ps, ok := runtime.PodStats(sum, ns.Name, big.ID); ok && len(ps.Containers) > 0 && ps.Containers[0].CPU != nil && ps.Containers[0].CPU.UsageNanoCores != nil {
			instant = float64(*ps.Containers[0].CPU.UsageNanoCores) / 1e9 / 0.5 * 100
		}
	}
	t.Logf("saturated worker: agent %.1f %% of its limit over %v, kubelet %.1f %% (its last interval alone: %.1f %%)", u.CPU, last.At.Sub(first.At), kubelet, instant)
	// Under load the worker runs near its half CPU, but on a two-core
	// machine whose other tests build and run containers beside this one
	// it got 70.9 % of it (the kubelet agreeing): what matters is that the
	// agreement below is checked on a worker well past idle.
	assert.Greater(t, u.CPU, 50.0, "loaded")
	assert.InDelta(t, kubelet, u.CPU, 2, "the agent's CPU%% agrees with the kubelet's over the same window")
	assert.Positive(t, last.MemUsage)
	assert.Eventually(t, func() bool {
		s, err := rt.Sample(ctx, big)
		return err == nil && s.NetBytes > first.NetBytes
	}, time.Minute, 250*time.Millisecond, "requests cross the Pod's interface")
	dashboardOnKind(ctx, t, rt, big.ID, small1.ID, small2.ID)
	stop()

	// Sundown: exactly small1 goes; small2, of the same Deployment, stays.
	require.NoError(t, rt.Stop(ctx, small1.ID))
	require.Eventually(t, func() bool {
		_, err := cs.CoreV1().Pods(ns.Name).Get(ctx, small1.ID, metav1.GetOptions{})
		return err != nil
	}, time.Minute, 250*time.Millisecond, "the chosen Pod is removed")
	list, err = rt.List(ctx)
	require.NoError(t, err)
	var ids []string
	for _, in := range list {
		ids = append(ids, in.ID)
	}
	assert.ElementsMatch(t, []string{big.ID, small2.ID}, ids, "only the chosen worker went")
	require.NoError(t, rt.Stop(ctx, small1.ID), "stopping a gone worker is not an error")

	// A throttle resizes the Pod in place: same Pod, new limit.
	require.NoError(t, rt.SetCPULimit(ctx, big.ID, 0.2))
	list, err = rt.List(ctx)
	require.NoError(t, err)
	for _, in := range list {
		if in.ID == big.ID {
			assert.Equal(t, 0.2, in.CPULimit, "resized in place")
		}
	}
	require.NoError(t, rt.RemoveAll(ctx))
}

// The agent's dashboard on the Kubernetes runtime, rendered by Chromium
// while the big worker is saturated: a row per Pod with the kubelet's
// figures, the loaded one near its limit, and a line per Pod in the CPU
// plot. (The host cannot reach Pod IPs, so the agent's health probes fail
// and its availability scores are low: the page shows what it knows.)
func dashboardOnKind(ctx context.Context, t *testing.T, rt *runtime.Kube, busy string, idle ...string) {
	a, err := agent.New(agent.Config{Runtime: rt, Interval: 500 * time.Millisecond, ProbeTimeout: 100 * time.Millisecond, Token: "kind-test",
		Pool: lifecycle.Config{Min: 3, Max: 3, SundownAfter: time.Hour, ScaleUpAfter: time.Hour, Low: 1, High: 99}})
	require.NoError(t, err)
	steps := 0
	require.Eventually(t, func() bool {
		if err := a.Step(ctx); err != nil {
			return false
		}
		steps++
		for _, w := range a.View().Workers {
			if w.ID == busy {
				return steps >= 3 && w.CPU > 50
			}
		}
		return false
	}, 2*time.Minute, 500*time.Millisecond, "the agent sees the loaded Pod busy")
	srv := httptest.NewServer(a.Handler(prometheus.NewRegistry()))
	defer srv.Close()
	dom := browsertest.Chromium(t, srv.URL+"/", 3*time.Second, "--dump-dom")
	cpu, err := strconv.ParseFloat(browsertest.Cell(browsertest.Row(t, dom, busy), "cpu"), 64)
	require.NoError(t, err)
	assert.Greater(t, cpu, 50.0, "the loaded Pod's CPU %% in its row")
	plot := browsertest.Plot(t, dom, "cpu-plot")
	for _, w := range append([]string{busy}, idle...) {
		row := browsertest.Row(t, dom, w)
		assert.Contains(t, row, `class="pill state`, w)
		assert.GreaterOrEqual(t, len(browsertest.Polyline(t, plot, w)), 2, "%s: a point per step", w)
	}
	assert.NotContains(t, dom, `class="stale"`, "the page reached the agent")
}

func nodeOf(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, pod string) string {
	p, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	require.NoError(t, err)
	return p.Spec.NodeName
}
