package kubeexp

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/ringside/ringside/bld/balance"
	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/backend/kube"
	"github.com/ringside/ringside/internal/cgroup"
)

// ThroughputRole is kube-throughput-role, seed 000 Fig. 12: one
// leader-based application of five replicas on the three CPU-limited
// nodes; reads and writes sent straight to the leader and to a follower
// on another node, for each number of clients.
type ThroughputRole struct {
	f        tpFlags
	replicas int
}

func (*ThroughputRole) Spec() experiments.Spec {
	return experiments.Spec{Name: "kube-throughput-role", Backends: processBackend, Quick: 3, Paper: 3, Row: roleRow{},
		Summary: "throughput and latency of the leader-based application by replica role: reads and writes at the leader and at a follower, 1–16 clients, on CPU-limited nodes (seed 000 Fig. 12)"}
}

func (t *ThroughputRole) Flags(fs *flag.FlagSet) {
	t.f.define(fs, 2*time.Second)
	fs.IntVar(&t.replicas, "replicas", 5, "replicas of the application")
}

// roleRow is one load point against the leader or a follower.
type roleRow struct {
	Backend    string `csv:"backend"`
	Target     string `csv:"target"`
	Operation  string `csv:"operation"`
	Clients    int    `csv:"clients"`
	Rep        int    `csv:"rep"`
	LeaderNode string `csv:"leader_node"`
	TargetNode string `csv:"target_node"`
	tpColumns
	Overlaps int    `csv:"overlaps"`
	Seed     uint64 `csv:"seed"`
}

func (t *ThroughputRole) Run(ctx context.Context, env *experiments.Env) error {
	if t.replicas < 2 {
		return fmt.Errorf("--replicas %d: a follower needs at least 2", t.replicas)
	}
	c, err := start(ctx, env, &t.f.k)
	if err != nil {
		return err
	}
	defer c.Close()
	d := t.f.pointDuration(env.Profile)
	hc := newHTTPClient()
	return experiments.RunGrid(ctx, env, experiments.Grid{Cells: 1}, func(ctx context.Context, tk experiments.Task) ([]roleRow, error) {
		return untilAsForced(env.Log, "leader/follower", func() ([]roleRow, error) { return t.rep(ctx, env, c, hc, tk, d) })
	})
}

func (t *ThroughputRole) rep(ctx context.Context, env *experiments.Env, c *kube.Cluster, hc *http.Client, tk experiments.Task, d time.Duration) ([]roleRow, error) {
	run, err := newTPRun(ctx, c, "tprole", t.f.k.lock, t.f.nodeCPUs)
	if err != nil {
		return nil, err
	}
	defer run.close()
	app, err := run.start(ctx, "app", t.replicas, 0, balance.Default, "", t.f.writeWork, t.f.readWork)
	if err != nil {
		return nil, err
	}
	leader, err := app.settled(ctx, hc, 30*time.Second)
	if err != nil {
		return nil, err
	}
	// A follower on another node than the leader's, so that forwarding
	// crosses nodes as it would in the paper's cluster.
	follower := ""
	for _, p := range app.pods {
		if p != leader && (follower == "" || app.node[p] != app.node[leader]) {
			follower = p
		}
	}
	var rows []roleRow
	for _, target := range []string{"leader", "follower"} {
		pod := map[string]string{"leader": leader, "follower": follower}[target]
		for _, op := range []string{"read", "write"} {
			method := map[string]string{"read": http.MethodGet, "write": http.MethodPut}[op]
			for _, n := range t.f.clientCounts(env.Profile) {
				if err := steady(ctx, hc, []*tpApp{app}, []string{leader}); err != nil {
					return nil, err
				}
				res := drive(ctx, n, d, tk.Seed, func() tpClient {
					return func(ctx context.Context, rng *rand.Rand) error { return doRequest(ctx, hc, method, app.url[pod], rng) }
				})
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				if res.firstErr != nil {
					env.Log.Warn("requests failed", "target", target, "operation", op, "clients", n, "errors", res.errors, "first", res.firstErr)
				}
				rows = append(rows, roleRow{Backend: kube.BackendKube, Target: target, Operation: op, Clients: n, Rep: tk.Rep,
					LeaderNode: app.node[leader], TargetNode: app.node[pod], tpColumns: res.columns(),
					Overlaps: kube.Overlaps(c.Events(run.ns)), Seed: tk.Seed})
			}
		}
	}
	return rows, nil
}

// Seed 000 Fig. 12, write throughput (req/s) at 1 and 16 clients.
var fig12 = map[string][2]float64{"leader": {1037.13, 4136.76}, "follower": {161.55, 1330.7}}

func (t *ThroughputRole) Report(in *experiments.ReportInput) (string, error) {
	tb := in.Table
	reps := map[[3]string][]float64{} // target, op, clients → req/s by repetition
	var rows [][]string
	lines := experiments.Lines{}
	for _, g := range tb.GroupBy("target", "operation", "clients") {
		rps := experiments.Summarize(tb.Floats(g.Rows, "throughput_rps"))
		p50 := experiments.Summarize(tb.Floats(g.Rows, "p50_ms"))
		p99 := experiments.Summarize(tb.Floats(g.Rows, "p99_ms"))
		errs := experiments.Summarize(tb.Floats(g.Rows, "errors"))
		reps[[3]string(g.Key)] = tb.Floats(g.Rows, "throughput_rps")
		paper := "–"
		if ref, ok := fig12[g.Key[0]]; ok && g.Key[1] == "write" {
			switch g.Key[2] {
			case "1":
				paper = experiments.Num(ref[0], 1)
			case "16":
				paper = experiments.Num(ref[1], 1)
			}
		}
		rows = append(rows, []string{g.Key[0], g.Key[1], g.Key[2], rps.Spread(1), experiments.Num(p50.Mean, 2),
			experiments.Num(p99.Mean, 2), experiments.Num(errs.Mean, 0), paper})
		n, _ := strconv.Atoi(g.Key[2])
		y, lo, hi := rps.MedianSpread()
		lines.Of(g.Key[0]+" "+g.Key[1]).Point(float64(n), y, lo, hi)
	}
	fig, err := in.Figure("throughput", "throughput by role", experiments.Line(experiments.Axes{Title: "throughput by role (Fig. 12)", X: "clients", Y: "requests/s"}, lines.List))
	if err != nil {
		return "", err
	}
	out := experiments.MarkdownTable([]string{"target", "operation", "clients", "req/s (range over repetitions)", "p50 ms", "p99 ms", "errors", "seed 000 Fig. 12 req/s"}, rows)
	out += "\n" + fig + "\n\n"
	overlaps := 0
	for i := range tb.Rows {
		overlaps = max(overlaps, int(tb.Float(i, "overlaps")))
	}
	out += fmt.Sprintf("Moments two replicas of the application led at once: %d (must be 0). ", overlaps)
	leader, follower := reps[[3]string{"leader", "write", "1"}], reps[[3]string{"follower", "write", "1"}]
	ratio := experiments.Summarize(leader).Mean / experiments.Summarize(follower).Mean
	if !math.IsNaN(ratio) && !math.IsInf(ratio, 0) {
		out += fmt.Sprintf("Leader / follower write throughput at 1 client: **%.2f** (seed 000: %.1f; target ≥ 2: %s). ",
			ratio, fig12["leader"][0]/fig12["follower"][0], experiments.Judge(experiments.Ratios(leader, follower), func(r float64) bool { return r >= 2 }))
	}
	out += "A write sent to a follower is forwarded to the leader: one more hop, and the follower's CPU on the way; " +
		"reads are served where they land. The nodes are cgroups with a CPU limit each (--node-cpus), not the paper's 12-core machines: " +
		"the ratios are the claim, not the absolute numbers. " + cgroup.StallNote + "\n"
	return out, nil
}
