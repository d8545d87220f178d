// Package kubeexp holds the Kubernetes election experiments of seeds 000,
// 001 and 003: leader distribution, election latency and re-election
// time, run by elector processes against a real API server.
package kubeexp

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/backend/kube"
)

// backends of the election experiments: elector processes against an
// API server, or real Pods on a kind cluster. The throughput experiments
// measure elector processes, so they run on the first only.
var (
	backends       = []string{kube.BackendKube, kube.BackendPods}
	processBackend = []string{kube.BackendKube}
)

// kubeFlags are the settings every kube experiment takes.
type kubeFlags struct {
	kubeconfig string
	lock       string
	parallel   int
	logs       string
}

// define adds the flags; parallel is false for an experiment that times
// elections, which runs one election set at a time so that repetitions
// do not compete for the CPU.
func (k *kubeFlags) define(fs *flag.FlagSet, parallel bool) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", os.Getenv("RINGSIDE_KUBECONFIG"), "API server to use (env RINGSIDE_KUBECONFIG; default: start a local control plane with three worker nodes; the kubernetes backend takes .kube/kind.kubeconfig, which make kind-up writes)")
	fs.StringVar(&k.lock, "lock", "lease", "lock object: lease or endpoints")
	fs.StringVar(&k.logs, "elector-logs", "", "keep every elector's debug log — each acquisition attempt's read, gate and write times, refusals — in this folder as <namespace>_<pod>.log (on the kubernetes backend: the elector container's log)")
	if parallel {
		fs.IntVar(&k.parallel, "parallel", 0, "elector processes to run at once across repetitions, each in a namespace of its own "+
			"(default: 40 on the process backend; on kind one repetition at a time — each elector is a Pod there, and a dozen "+
			"repetitions at once on a small machine time the machine's load, not the algorithms)")
	}
}

// parallelism is the Grid.Parallel budget of elector processes on backend.
func (k *kubeFlags) parallelism(backend string) int {
	switch {
	case k.parallel > 0:
		return k.parallel
	case backend == kube.BackendPods:
		return 1 // every repetition costs more: it runs alone
	}
	return 40
}

// waitLeaders waits until every app in ns has a leader, or limit passes;
// it returns the leaders found, or an error when an elector of ns
// crashed, which would leave its application short of a candidate.
func waitLeaders(ctx context.Context, c *kube.Cluster, ns string, apps []string, limit time.Duration) (map[string]string, error) {
	return waitLeadersUnless(ctx, c, ns, apps, limit, nil)
}

// waitLeadersUnless is waitLeaders that also stops once done (if not nil)
// says waiting longer would show nothing more.
func waitLeadersUnless(ctx context.Context, c *kube.Cluster, ns string, apps []string, limit time.Duration, done func() bool) (map[string]string, error) {
	deadline := time.Now().Add(limit)
	for {
		if err := c.Crashed(ns); err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, a := range apps {
			if id, _ := c.Leader(ns, a); id != "" {
				out[a] = id
			}
		}
		if len(out) == len(apps) || time.Now().After(deadline) || ctx.Err() != nil || done != nil && done() {
			return out, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leaderNow returns app's leader in ns as it stands, waiting up to limit
// for one. A leader seen once can lose a short lease before it is
// signalled — its renewal late on a loaded machine — and until the next
// one starts there is nobody: a compose stack's CI run signalled "" there.
func leaderNow(ctx context.Context, c *kube.Cluster, ns, app string, limit time.Duration) (string, error) {
	leaders, err := waitLeaders(ctx, c, ns, []string{app}, limit)
	if err != nil {
		return "", err
	}
	if leaders[app] == "" {
		return "", fmt.Errorf("%s has no leader within %s: %s", app, limit, eventCounts(c.Events(ns)))
	}
	return leaders[app], nil
}

// starved reports whether every one of candidates (event IDs) has been
// refused by its algorithm's rule twice, a retry period or more apart:
// asked again after a full retry period, with the other applications'
// leaders standing still, the rule said no again, and it would go on
// saying no. An algorithm that never refuses is never starved.
func starved(events []kube.Event, candidates []string, retry time.Duration) bool {
	first, last := map[string]time.Time{}, map[string]time.Time{}
	for _, e := range events {
		if e.Event != "refused" {
			continue
		}
		if f, ok := first[e.ID]; !ok || e.TS.Before(f) {
			first[e.ID] = e.TS
		}
		if e.TS.After(last[e.ID]) {
			last[e.ID] = e.TS
		}
	}
	for _, id := range candidates {
		if f, ok := first[id]; !ok || last[id].Sub(f) < retry {
			return false
		}
	}
	return len(candidates) > 0
}

// eventCounts says what the electors of a namespace reported, for an
// error: "5 launched, 5 campaign, 0 started".
func eventCounts(events []kube.Event) string {
	n := map[string]int{}
	for _, e := range events {
		n[e.Event]++
	}
	var out []string
	for _, k := range []string{"launched", "campaign", "leader", "started", "stopped", "killed", "refused"} {
		out = append(out, fmt.Sprintf("%d %s", n[k], k))
	}
	return strings.Join(out, ", ")
}

func start(ctx context.Context, env *experiments.Env, k *kubeFlags) (*kube.Cluster, error) {
	if k.parallel < 0 {
		return nil, fmt.Errorf("--parallel %d: want a count of elector processes ≥ 1 (or 0 for the backend's default)", k.parallel)
	}
	if env.Backend == kube.BackendPods && k.kubeconfig == "" {
		if _, err := os.Stat(kube.KindKubeconfig); err == nil {
			k.kubeconfig = kube.KindKubeconfig // make kind-up's cluster
		}
	}
	c, err := kube.Start(ctx, k.kubeconfig, env.Backend)
	if err != nil {
		return nil, fmt.Errorf("%s backend: %w", env.Backend, err)
	}
	if k.logs != "" {
		if err := c.KeepLogs(k.logs); err != nil {
			c.Close()
			return nil, fmt.Errorf("--elector-logs: %w", err)
		}
	}
	env.Cluster = kube.Describe(ctx, c.CS)
	return c, nil
}
