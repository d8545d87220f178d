package kubeexp

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ringside/ringside/bld/balance"
	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/backend/kube"
)

// Rebalance is kube-rebalance: applications elected on three worker
// nodes, then a fourth node joins with a fresh candidate of every
// application (case join), or the fullest node is drained — cordoned, its
// candidates stopped, their leaders failing over — and returns with a
// fresh candidate of every application (case drain). BLD and the default
// election never move a leader, so the new or returned node stays empty;
// cle-balanced's controller moves leaders there (preferredHolder).
// Measured from the join or return: the time until the leaders are spread
// within one again, the moves it took against the fewest that could,
// and any moment with two leaders of one application.
type Rebalance struct {
	k        kubeFlags
	algs     experiments.ChoiceList
	cases    experiments.ChoiceList
	apps     int
	replicas int
	timing   kube.Timing
	window   float64
	joinNode string // kind: the worker held back for the join case
}

// joinNode is the node that joins on the process backend: an API object.
// On kind it is a worker of the cluster held back (--join-node).
const joinNode = "worker-4"

// The cases.
const (
	caseJoin  = "join"
	caseDrain = "drain"
)

func (*Rebalance) Spec() experiments.Spec {
	return experiments.Spec{Name: "kube-rebalance", Backends: backends, Quick: 1, Paper: 20, Row: rebalanceRow{},
		Summary: "a fourth node joins a cluster whose leaders are spread over three: time until they are spread within one again, leader moves against the fewest possible, overlaps — default and BLD never move, cle-balanced does"}
}

func (r *Rebalance) Flags(fs *flag.FlagSet) {
	r.algs = experiments.ChoiceList{Vals: []string{balance.Default, balance.CLEBalanced}, Allowed: balance.Algorithms}
	fs.Var(&r.algs, "algorithms", "algorithms to compare (bld never moves a leader either)")
	r.cases = experiments.ChoiceList{Vals: []string{caseJoin, caseDrain}, Allowed: []string{caseJoin, caseDrain}}
	fs.Var(&r.cases, "cases", "join (a fourth node joins) and drain (the fullest node is drained and returns)")
	fs.IntVar(&r.apps, "apps", 6, "applications")
	fs.IntVar(&r.replicas, "replicas", 3, "replicas of each application on the first three nodes")
	fs.Float64Var(&r.window, "window", 2, "lease durations to wait for balance after the join (the target)")
	timingFlags(fs, &r.timing, 2*time.Second, 1500*time.Millisecond, 500*time.Millisecond)
	fs.StringVar(&r.joinNode, "join-node", "", "kind, case join: the worker to hold back — cordoned while the applications are elected on the other three, "+
		"it joins by being uncordoned, and each application gets a replica there (the cluster needs four workers: make kind-up KIND_CONFIG=k8s/kind-join.yaml)")
	r.k.define(fs, false)
}

// rebalanceRow is one join.
type rebalanceRow struct {
	Backend      string        `csv:"backend"`
	Algorithm    string        `csv:"algorithm"`
	Case         string        `csv:"case"` // join or drain
	Rep          int           `csv:"rep"`
	Apps         int           `csv:"apps"`
	SpreadBefore int           `csv:"spread_before"` // max − min over the three nodes before the join or the drain
	SpreadJoin   int           `csv:"spread_join"`   // over the nodes after it (four, or the three again), at the join or return
	SpreadFinal  int           `csv:"spread_final"`  // over those nodes, at the end of the window
	Balanced     time.Duration `csv:"balanced_ms"`   // join or return → spread ≤ 1; −1 ms if not within the window
	Moves        int           `csv:"moves"`         // leader changes after the join or return
	Ordered      int           `csv:"ordered"`       // of those, hand-overs the controller ordered; the rest are re-elections after a lost Lease
	MinMoves     int           `csv:"min_moves"`     // the fewest moves that balance the counts at the join or return
	Regained     int           `csv:"regained"`      // leaderships its previous leader took again (a renewal missed under load): no move
	// The time each move left its application without a leader — when a
	// leader-based application takes no write — over the run's moves.
	GapP50   time.Duration `csv:"move_gap_p50_ms"`
	GapMax   time.Duration `csv:"move_gap_max_ms"`
	Overlaps int           `csv:"overlaps"`
	Seed     uint64        `csv:"seed"`
}

func (r *Rebalance) Run(ctx context.Context, env *experiments.Env) error {
	if r.apps < 1 || r.replicas < 1 || !(r.window > 0) {
		return fmt.Errorf("kube-rebalance: --apps %d, --replicas %d, --window %v: want each > 0", r.apps, r.replicas, r.window)
	}
	c, err := start(ctx, env, &r.k)
	if err != nil {
		return err
	}
	defer c.Close()
	join := joinNode
	if env.Backend == kube.BackendPods && (slices.Contains(r.cases.Vals, caseJoin) || r.joinNode != "") {
		// A node cannot join a running kind cluster: a fourth worker is
		// held back instead, cordoned (BLD counts schedulable workers
		// only) until it joins, and left schedulable at the end, as found.
		if r.joinNode == "" || !slices.Contains(c.WorkerNodes, r.joinNode) || len(c.WorkerNodes) != 4 {
			return fmt.Errorf("kube-rebalance --backend kubernetes --cases join: name one of four schedulable workers to hold back with --join-node "+
				"(the cluster has %v; make kind-up KIND_CONFIG=k8s/kind-join.yaml makes one with four), or run --cases %s", c.WorkerNodes, caseDrain)
		}
		join = r.joinNode
		if err := cordon(ctx, c, join, true); err != nil {
			return err
		}
		defer cordon(context.WithoutCancel(ctx), c, join, false)
		c.WorkerNodes = slices.DeleteFunc(slices.Clone(c.WorkerNodes), func(n string) bool { return n == join })
	}
	if len(c.WorkerNodes) != 3 || slices.Contains(c.WorkerNodes, join) {
		return fmt.Errorf("kube-rebalance starts from three worker nodes without %s; the cluster has %v", join, c.WorkerNodes)
	}
	// One at a time: the joining and the drained node are the cluster's.
	grid := experiments.Grid{Cells: len(r.algs.Vals) * len(r.cases.Vals)}
	return experiments.RunGrid(ctx, env, grid, func(ctx context.Context, tk experiments.Task) ([]rebalanceRow, error) {
		alg, cs := r.algs.Vals[tk.Cell/len(r.cases.Vals)], r.cases.Vals[tk.Cell%len(r.cases.Vals)]
		row, err := againOnFailedStart(env, func() (rebalanceRow, error) { return r.once(ctx, c, env.Backend, join, alg, cs) },
			"algorithm", alg, "case", cs, "rep", tk.Rep)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", alg, cs, err)
		}
		row.Backend, row.Algorithm, row.Case, row.Rep, row.Apps, row.Seed = env.Backend, alg, cs, tk.Rep, r.apps, tk.Seed
		return []rebalanceRow{row}, nil
	})
}

func (r *Rebalance) once(ctx context.Context, c *kube.Cluster, backend, join, alg, cs string) (rebalanceRow, error) {
	ns, err := c.Namespace(ctx, "rebalance")
	if err != nil {
		return rebalanceRow{}, err
	}
	defer c.StopNamespace(ns)
	// On kind the applications may also run on the held-back node: they
	// get a replica there when it joins.
	appNodes := c.WorkerNodes
	if backend == kube.BackendPods && cs == caseJoin {
		appNodes = append(slices.Clone(c.WorkerNodes), join)
	}
	names, podNode, err := elect(ctx, c, ns, appNodes, r.apps, r.replicas, alg, r.k.lock, r.timing)
	if err != nil {
		return rebalanceRow{}, err
	}
	// Let moves under way finish: a lease.
	if err := sleep(ctx, r.timing.Lease); err != nil {
		return rebalanceRow{}, err
	}
	counts := func(nodes []string) (map[string]int, bool) {
		out := map[string]int{}
		for _, n := range nodes {
			out[n] = 0
		}
		for _, a := range names {
			id, _ := c.Leader(ns, a)
			if id == "" {
				return out, false
			}
			out[podNode[id]]++
		}
		return out, true
	}
	before, _ := counts(c.WorkerNodes)
	row := rebalanceRow{SpreadBefore: spreadOf(before, c.WorkerNodes)}

	// The event: a fresh candidate of every application comes up on node.
	node, nodes := join, append(slices.Clone(c.WorkerNodes), join)
	if cs == caseJoin {
		if err := r.join(ctx, c, backend, join); err != nil {
			return rebalanceRow{}, err
		}
		defer r.leave(c, backend, join)
	} else {
		node, nodes = fullest(before, c.WorkerNodes), c.WorkerNodes
		// Never leave a node of the cluster cordoned, whatever happens.
		defer cordon(context.WithoutCancel(ctx), c, node, false)
		if err := r.drain(ctx, c, ns, node, names, podNode); err != nil {
			return rebalanceRow{}, err
		}
		if err := cordon(ctx, c, node, false); err != nil {
			return rebalanceRow{}, err
		}
	}
	// The counts at the event need every application's leader: one whose
	// renewal was lost on a loaded machine would be left out of them and
	// the fewest moves read too low.
	if _, err := waitLeaders(ctx, c, ns, names, 2*r.timing.Lease); err != nil {
		return rebalanceRow{}, err
	}
	at, _ := counts(nodes)
	row.SpreadJoin, row.MinMoves = spreadOf(at, nodes), minMoves(at, nodes)
	joinAt := time.Now()
	joined, err := r.fresh(ctx, c, backend, ns, node, names, alg, cs == caseJoin)
	if err != nil {
		return rebalanceRow{}, err
	}
	for k, v := range joined {
		podNode[k] = v
	}
	row.Balanced = -time.Millisecond
	// The window opens when the fresh candidates run (on kind, Pods take
	// a while to start); the time to balance counts from the join.
	end := time.Now().Add(time.Duration(r.window * float64(r.timing.Lease)))
	for time.Now().Before(end) {
		now, all := counts(nodes)
		if all && spreadOf(now, nodes) <= 1 && row.Balanced < 0 && row.SpreadJoin > 1 {
			row.Balanced = time.Since(joinAt)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return rebalanceRow{}, err
		}
	}
	final, _ := counts(nodes)
	row.SpreadFinal = spreadOf(final, nodes)
	if row.SpreadJoin <= 1 {
		row.Balanced = 0 // balanced already
	}
	events := c.Events(ns)
	mc := moveGaps(events, joinAt)
	gaps := mc.gaps
	row.Moves, row.Ordered, row.Regained = len(gaps), mc.ordered, mc.regained
	if len(gaps) > 0 {
		ms := make([]float64, len(gaps))
		for i, g := range gaps {
			ms[i] = experiments.Ms(g)
		}
		g := experiments.Summarize(ms)
		row.GapP50, row.GapMax = time.Duration(g.P50*float64(time.Millisecond)), slices.Max(gaps)
	}
	row.Overlaps = kube.Overlaps(events)
	return row, c.Crashed(ns)
}

// fresh brings up a fresh candidate of every application on node and
// returns where they run ("ns/pod" → node). The process backend starts
// them; on kind they are the Deployments' own. After a drain the drained
// candidates' replacements wait Pending for the node (their spread
// constraint allows no second replica on another node) and start when it
// returns; after a join (grow) every Deployment gets one replica more,
// which the spread constraint puts on the empty node.
func (r *Rebalance) fresh(ctx context.Context, c *kube.Cluster, backend, ns, node string, names []string, alg string, grow bool) (map[string]string, error) {
	if backend != kube.BackendPods {
		var fresh []kube.App
		for _, a := range names {
			fresh = append(fresh, kube.App{Name: a, Replicas: 1, Nodes: []string{node}, First: r.replicas})
		}
		return c.Deploy(ctx, ns, fresh, 0, alg, r.k.lock, r.timing)
	}
	if grow {
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, r.replicas+1)
		for _, a := range names {
			if _, err := c.CS.AppsV1().Deployments(ns).Patch(ctx, a, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return nil, fmt.Errorf("a replica of %s on %s: %w", a, node, err)
			}
		}
	}
	out := map[string]string{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		// The applications' Pods only: cle-balanced's controller may run there too.
		list, err := c.CS.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node,
			LabelSelector: "app.kubernetes.io/name in (" + strings.Join(names, ",") + ")"})
		if err != nil {
			return false, nil
		}
		for _, p := range list.Items {
			if p.Status.Phase == v1.PodRunning && p.DeletionTimestamp == nil {
				out[ns+"/"+p.Name] = node
			}
		}
		return len(out) >= len(names), nil
	})
	if err != nil {
		return nil, fmt.Errorf("%d of %d fresh candidates running on %s: %w", len(out), len(names), node, err)
	}
	return out, nil
}

// elect deploys n applications of replicas each over nodes and
// waits until every one has a leader; it returns their names and where
// each candidate runs ("ns/pod" → node).
func elect(ctx context.Context, c *kube.Cluster, ns string, nodes []string, n, replicas int, alg, lock string, t kube.Timing) ([]string, map[string]string, error) {
	var apps []kube.App
	var names []string
	for i := range n {
		apps = append(apps, kube.App{Name: fmt.Sprintf("app-%d", i), Replicas: replicas, Nodes: nodes})
		names = append(names, apps[i].Name)
	}
	podNode, err := c.Deploy(ctx, ns, apps, 0, alg, lock, t)
	if err != nil {
		return nil, nil, err
	}
	limit := 2*t.Lease + 30*time.Second
	if got, err := waitLeaders(ctx, c, ns, names, limit); err != nil || len(got) != len(names) {
		return nil, nil, fmt.Errorf("not every application elected within %s (%v): %s", limit, err, eventCounts(c.Events(ns)))
	}
	return names, podNode, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (r *Rebalance) Report(in *experiments.ReportInput) (string, error) {
	t := in.Table
	var rows [][]string
	var verdicts []string
	for _, g := range t.GroupBy("algorithm", "case") {
		alg, cs := g.Key[0], g.Key[1]
		var balanced, gapP50 []float64
		moves, ordered, minimum, regained, overlaps, never, finalWorst := 0, 0, 0, 0, 0, 0, 0
		gapMax := 0.0
		for _, i := range g.Rows {
			if t.Float(i, "moves") > 0 {
				gapP50 = append(gapP50, t.Float(i, "move_gap_p50_ms"))
				gapMax = max(gapMax, t.Float(i, "move_gap_max_ms"))
			}
			if b := t.Float(i, "balanced_ms"); b >= 0 {
				balanced = append(balanced, b)
			} else {
				never++
			}
			moves += int(t.Float(i, "moves"))
			ordered += int(t.Float(i, "ordered"))
			minimum += int(t.Float(i, "min_moves"))
			regained += int(t.Float(i, "regained"))
			overlaps += int(t.Float(i, "overlaps"))
			finalWorst = max(finalWorst, int(t.Float(i, "spread_final")))
		}
		s := experiments.Summarize(balanced)
		p50 := "never"
		if s.N > 0 {
			p50 = experiments.Num(s.P50, 0)
		}
		gap := "–"
		if len(gapP50) > 0 {
			gap = experiments.Num(experiments.Summarize(gapP50).P50, 0) + " / " + experiments.Num(gapMax, 0)
		}
		rows = append(rows, []string{alg, cs, strconv.Itoa(len(g.Rows)), fmt.Sprintf("%d of %d", s.N, len(g.Rows)), p50,
			strconv.Itoa(finalWorst), strconv.Itoa(moves), strconv.Itoa(ordered), strconv.Itoa(minimum), gap, strconv.Itoa(regained), strconv.Itoa(overlaps)})
		if alg == balance.CLEBalanced {
			verdicts = append(verdicts, fmt.Sprintf("after a %s cle-balanced balanced within the window in %d of %d runs (target: all, %s), with %d moves against the fewest possible %d (%s; "+
				"%d ordered by the controller, against at most %d for the counts and the re-elections: %s), %d overlaps (target 0: %s)",
				cs, s.N, len(g.Rows), experiments.Verdict(never == 0), moves, minimum, experiments.Verdict(moves == minimum),
				ordered, minimum+moves-ordered, experiments.Verdict(ordered <= minimum+moves-ordered), overlaps, experiments.Verdict(overlaps == 0)))
		}
	}
	out := experiments.MarkdownTable([]string{"algorithm", "case", "runs", "balanced within the window", "p50 ms to balance",
		"max − min at the end (worst)", "moves", "of them ordered", "fewest possible", "leaderless per move p50 / max ms", "leases regained", "overlaps"}, rows)
	out += "\n*join*: a fourth node joins with a fresh candidate of every application; *drain*: the node with the most leaders is cordoned and its candidates stopped " +
		"(their leaders fail over to the other two), then it returns with a fresh candidate of every application. Times, moves and spreads count from the join or the return. " +
		"A leader that lost its Lease (a renewal missed on a loaded machine) and took it again moved nothing: it is counted apart, under leases regained. " +
		"A move is *ordered* when the previous leader handed over to the new one (its \"stopped\" event names it: the controller moved it); the other moves are re-elections after a lost Lease, " +
		"and each may call for one corrective move more, so the controller's ordered moves are held to the fewest possible plus the re-elections. " +
		"The window is the target, two lease durations from when the fresh candidates run. A leader moves when the controller marks another candidate preferred: " +
		"the holder steps down at once and lets its Lease run out, the controller asks the preferred candidate whether it is there and names it — a few round trips per move, and moves of different applications run at once. " +
		"The default election and BLD never move a leader: the new or returned node stays empty until some leader is lost. " +
		"*Leaderless per move* is the time from the end of the previous leadership to the start of the moved one, from the electors' events: " +
		"the write gap a leader-based application (leaderapp) sees at the least, since it takes writes only at the replica its sidecar names. " +
		"The gap inside leaderapp itself is not measured here: its membership is fixed at start, and a join or a return adds a replica. " +
		"On kind the fresh candidates are the Deployments' own Pods, so the time to balance includes their start: after a drain the drained candidates' replacements wait, Pending, for the node's return; " +
		"a node cannot join a running kind cluster, so for the join a fourth worker is held back (cordoned) and each Deployment grows by one replica when it is uncordoned.\n"
	if len(verdicts) > 0 {
		out += "\nTargets: " + strings.Join(verdicts, "; ") + ".\n"
	}
	return out, nil
}
