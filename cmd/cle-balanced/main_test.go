package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ringside/ringside/bld"
	"github.com/ringside/ringside/bld/balance"
	"github.com/ringside/ringside/bld/strategy"
	"github.com/ringside/ringside/experiments/backend/kube/controlplane"
	"github.com/ringside/ringside/internal/fdtest"
	"github.com/ringside/ringside/internal/imagebuild"
	"github.com/ringside/ringside/internal/klogslog"
	"github.com/ringside/ringside/internal/klogtest"
)

func TestMain(m *testing.M) {
	fdtest.RunChild(main)
	klogslog.Install() // as main does, before any test runs client-go
	os.Exit(m.Run())
}

// leaders follows who leads each election from the candidates' events,
// counting the moments two candidates of one election led at once.
type leaders struct {
	mu      sync.Mutex
	leading map[string]map[string]bool // election → ids
	overlap int
}

func (l *leaders) event(election, id string) func(string, string) {
	return func(event, _ string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.leading[election] == nil {
			l.leading[election] = map[string]bool{}
		}
		switch event {
		case "started":
			if len(l.leading[election]) > 0 {
				l.overlap++
			}
			l.leading[election][id] = true
		case "stopped":
			delete(l.leading[election], id)
		}
	}
}

// snapshot returns each election's one leader ("" for none or several)
// and the overlaps so far.
func (l *leaders) snapshot() (map[string]string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]string{}
	for e, ids := range l.leading {
		if len(ids) == 1 {
			for id := range ids {
				out[e] = id
			}
		}
	}
	return out, l.overlap
}

// candidate campaigns in-process for app on node, as cle-balanced; the
// returned function makes it leave.
func candidate(t *testing.T, cs kubernetes.Interface, ns, app, node string, l *leaders) context.CancelFunc {
	t.Helper()
	id := app + "-" + node
	c, err := bld.NewCandidate(bld.CandidateConfig{
		Algorithm: balance.CLEBalanced, Election: app, Namespace: ns, Identity: id, Node: node, Client: cs,
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 500 * time.Millisecond,
		OnEvent: l.event(app, id), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Run(ctx); err != nil {
			t.Errorf("candidate %s: %v", id, err)
		}
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// perNode counts the leaders on each of nodes (id "app-node").
func perNode(lead map[string]string, nodes ...string) map[string]int {
	out := map[string]int{}
	for _, n := range nodes {
		out[n] = 0
	}
	for _, id := range lead {
		for _, n := range nodes {
			if len(id) > len(n) && id[len(id)-len(n)-1:] == "-"+n {
				out[n]++
			}
		}
	}
	return out
}

func spread(counts map[string]int) int {
	hi, lo := -1, 1<<30
	for _, c := range counts {
		hi, lo = max(hi, c), min(lo, c)
	}
	return hi - lo
}

// dump logs the Leases and LeaseCandidates of ns, for a failure.
func dump(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := context.Background()
	leases, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, l := range leases.Items {
		t.Logf("lease %s: %+v", l.Name, l.Spec)
	}
	lcs, err := cs.CoordinationV1alpha2().LeaseCandidates(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, c := range lcs.Items {
		t.Logf("candidate %s %v: %+v", c.Name, c.Annotations, c.Spec)
	}
}

// apiServer starts a real API server with namespace ns, and returns a
// client of it (sixteen candidates share it), its kubeconfig and the
// controller binary.
func apiServer(t *testing.T, ns string) (kubernetes.Interface, string, string) {
	t.Helper()
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(cp.Stop)
	rc, err := cp.RestConfig()
	require.NoError(t, err)
	rc.QPS, rc.Burst = 500, 1000
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	_, err = cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	bin, err := imagebuild.Static(ctx, "github.com/ringside/ringside/cmd/cle-balanced")
	require.NoError(t, err)
	return cs, cp.Kubeconfig, bin
}

// startController runs a replica of the controller binary on ns.
func startController(t *testing.T, bin, kubeconfig, ns, id string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--id", id, "--namespace", ns, "--watch-namespace", ns,
		"--lease-duration", "2s", "--renew-deadline", "1500ms", "--retry-period", "500ms", "--ack-wait", "500ms",
		"--http", "127.0.0.1:0", "--log-level", "warn")
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// The controller binary against a real API server, two replicas: every
// application elected and spread evenly; the replica that controls is
// killed and the other names the successor of a leader that left; a
// fourth node's candidates join and one leader moves there; never two
// leaders of one application at once.
func TestCoordinatedElectionEndToEnd(t *testing.T) {
	ctx := context.Background()
	const ns = "cle"
	cs, kubeconfig, bin := apiServer(t, ns)

	replicas := map[string]*exec.Cmd{}
	for _, id := range []string{"ctl-0", "ctl-1"} {
		replicas[id] = startController(t, bin, kubeconfig, ns, id)
	}

	l := &leaders{leading: map[string]map[string]bool{}}
	nodes := []string{"w1", "w2", "w3"}
	apps := []string{"a0", "a1", "a2", "a3"}
	stops := map[string]context.CancelFunc{}
	for _, app := range apps {
		for _, n := range nodes {
			stops[app+"-"+n] = candidate(t, cs, ns, app, n, l)
		}
	}
	waitFor := func(what string, d time.Duration, ok func(map[string]string) bool) map[string]string {
		t.Helper()
		deadline := time.Now().Add(d)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			lead, _ := l.snapshot()
			if ok(lead) {
				return lead
			}
			if time.Now().After(deadline) {
				dump(t, cs, ns)
				t.Fatalf("%s: not within %s; leaders %v", what, d, lead)
			}
			<-tick.C
		}
	}
	allLed := func(lead map[string]string) bool {
		for _, a := range apps {
			if lead[a] == "" {
				return false
			}
		}
		return true
	}
	lead := waitFor("every application elected, spread at most one", time.Minute, func(lead map[string]string) bool {
		return allLed(lead) && spread(perNode(lead, nodes...)) <= 1
	})
	t.Logf("elected: %v", lead)

	// Kill the replica that controls; the other takes over and names the
	// successor of a leader that leaves.
	ctlLease, err := cs.CoordinationV1().Leases(ns).Get(ctx, "ringside-cle-balanced", metav1.GetOptions{})
	require.NoError(t, err)
	controlling := *ctlLease.Spec.HolderIdentity
	require.NoError(t, replicas[controlling].Process.Signal(syscall.SIGKILL))
	gone := lead["a0"]
	stops[gone]()
	lead = waitFor("a successor for a0 named by the surviving replica", time.Minute, func(lead map[string]string) bool {
		return lead["a0"] != "" && lead["a0"] != gone
	})
	ctlLease, err = cs.CoordinationV1().Leases(ns).Get(ctx, "ringside-cle-balanced", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEqual(t, controlling, *ctlLease.Spec.HolderIdentity, "the surviving replica controls")
	require.NotEqual(t, gone, lead["a0"])

	// A fourth node joins with a candidate of every application: the
	// fullest node gives it one leader.
	waitFor("balanced after the leave", time.Minute, func(lead map[string]string) bool {
		return allLed(lead) && spread(perNode(lead, nodes...)) <= 1
	})
	before, _ := l.snapshot()
	for _, app := range apps {
		candidate(t, cs, ns, app, "w4", l)
	}
	all := append(nodes, "w4")
	lead = waitFor("a leader moved to the new node", time.Minute, func(lead map[string]string) bool {
		return allLed(lead) && spread(perNode(lead, all...)) <= 1
	})
	moved := 0
	for _, a := range apps {
		if before[a] != lead[a] {
			moved++
		}
	}
	t.Logf("before %v, after %v", before, lead)
	require.Equal(t, 1, moved, "2:1:1:0 is balanced by one move")
	_, overlap := l.snapshot()
	require.Zero(t, overlap, "two leaders of one application at once")
}

// Applications whose Pods announce the strategy get their first holders
// from the controller before any candidate starts: each Lease is created
// naming a Pod, spread one per node, and the named candidates lead on
// their first read once they start; a Pod whose lease-duration
// annotation is bad is named nothing from its Pod (its candidates, had
// they started, would create the Lease as before).
func TestFirstHoldersAreNamedFromThePods(t *testing.T) {
	ctx := context.Background()
	const ns = "cle-pods"
	cs, kubeconfig, bin := apiServer(t, ns)
	startController(t, bin, kubeconfig, ns, "ctl-0")

	nodes, apps := []string{"w1", "w2", "w3"}, []string{"a0", "a1", "a2"}
	pod := func(app, node, lease string) {
		t.Helper()
		_, err := cs.CoreV1().Pods(ns).Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: app + "-" + node, Labels: map[string]string{bld.ElectionLabel: app},
				Annotations: map[string]string{bld.StrategyAnnotation: strategy.Name, bld.LeaseDurationAnnotation: lease}},
			Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "elector", Image: "ringside/elector"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, app := range apps {
		for _, n := range nodes {
			pod(app, n, "2s")
		}
	}
	for _, n := range nodes {
		pod("bad", n, "forever")
	}
	named := map[string]string{}
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for len(named) < len(apps) {
		for _, app := range apps {
			if l, err := cs.CoordinationV1().Leases(ns).Get(ctx, app, metav1.GetOptions{}); err == nil && l.Spec.HolderIdentity != nil {
				require.Equal(t, strategy.Name, string(*l.Spec.Strategy))
				require.EqualValues(t, 2, *l.Spec.LeaseDurationSeconds, "the Pods' lease duration")
				named[app] = *l.Spec.HolderIdentity
			}
		}
		if time.Now().After(deadline) {
			dump(t, cs, ns)
			t.Fatalf("the controller named %v, not every application, within a minute", named)
		}
		<-tick.C
	}
	require.Equal(t, map[string]int{"w1": 1, "w2": 1, "w3": 1}, perNode(named, nodes...), "named %v", named)
	_, err := cs.CoordinationV1().Leases(ns).Get(ctx, "bad", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "no Lease from Pods with a bad lease duration: %v", err)

	// The candidates start now; the named ones lead, and stay leading.
	l := &leaders{leading: map[string]map[string]bool{}}
	for _, app := range apps {
		for _, n := range nodes {
			candidate(t, cs, ns, app, n, l)
		}
	}
	for {
		lead, overlap := l.snapshot()
		require.Zero(t, overlap, "two leaders of one application at once")
		if len(lead) == len(apps) {
			require.Equal(t, named, lead, "the leaders are the ones named from the Pods")
			break
		}
		if time.Now().After(deadline.Add(time.Minute)) {
			dump(t, cs, ns)
			t.Fatalf("leaders %v, named %v", lead, named)
		}
		<-tick.C
	}
}

// Flooded with more connections than it may open files, the controller
// keeps its process and answers /healthz again once the flood has gone.
func TestOutlivesAConnectionFlood(t *testing.T) {
	cp, err := controlplane.Start(context.Background(), t.TempDir())
	require.NoError(t, err)
	t.Cleanup(cp.Stop)
	fdtest.Check(t, nil, 1, "/healthz", func(a []string) []string {
		return []string{"--kubeconfig", cp.Kubeconfig, "--http", a[0], "--id", "flood-0", "--log-level", "error"}
	})
}

// A wait it cannot use is refused before anything starts, with the
// setting named: malformed in the environment, or negative on the
// command line.
func TestBadGatherIsRefused(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: not-a-secret}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	args := []string{"--id", "cle-0", "--kubeconfig", kc, "--http", "127.0.0.1:0"}
	t.Setenv("CLE_GATHER", "soon")
	envErr := run(t.Context(), args)
	require.ErrorContains(t, envErr, "CLE_GATHER")
	require.NoError(t, os.Unsetenv("CLE_GATHER"))
	// Were it accepted, the controller would run: bounded so the test
	// fails rather than hangs.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	flagErr := run(ctx, append(args, "--gather", "-1s"))
	require.ErrorContains(t, flagErr, "gather -1s")
	for _, err := range []error{envErr, flagErr} {
		require.NotContains(t, err.Error(), "not-a-secret", "the kubeconfig's token stays out of errors")
	}
}

// What client-go logs through klog reaches this replica's logger: with
// its id, at its level (the info line stays below --log-level warn).
func TestClientGoLogsThroughTheReplicasLogger(t *testing.T) {
	out := klogtest.Stderr(t, func() {
		err := run(t.Context(), []string{"--id", "cle-log", "--kubeconfig", filepath.Join(t.TempDir(), "none"), "--log-level", "warn"})
		require.Error(t, err, "no kubeconfig there")
	})
	assert.Contains(t, out, "level=ERROR msg=\""+klogtest.Error+"\" id=cle-log")
	assert.NotContains(t, out, klogtest.Info)
}
