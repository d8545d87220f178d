package kubeexp

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ringside/ringside/bld/balance"
	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/backend/kube"
)

// LeaseTradeoff is kube-lease-tradeoff: the question every operator
// tuning --leader-elect-lease-duration asks. For each lease duration and
// algorithm: how long a SIGKILLed leader takes to replace, against what
// the election costs the API server — requests per minute while nothing
// happens, and requests per election — counted by the API server itself
// (apiserver_request_total, scraped before and after).
type LeaseTradeoff struct {
	k        kubeFlags
	algs     experiments.ChoiceList
	leases   experiments.FloatList // seconds
	apps     int
	replicas int
	steady   float64
}

func (*LeaseTradeoff) Spec() experiments.Spec {
	return experiments.Spec{Name: "kube-lease-tradeoff", Backends: backends, Quick: 1, Paper: 5, Row: leaseTradeoffRow{},
		Summary: "lease duration × algorithm: re-election time after SIGKILL against the API server's requests per minute in steady state and per election (apiserver_request_total)"}
}

func (l *LeaseTradeoff) Flags(fs *flag.FlagSet) {
	l.algs = experiments.ChoiceList{Vals: []string{balance.Default, balance.CLEBalanced}, Allowed: balance.Algorithms}
	fs.Var(&l.algs, "algorithms", "algorithms to compare")
	fs.Var(&l.leases, "lease", "lease durations in seconds, renew deadline ¾ and retry period ¼ of each (default: 2,4; 2,5,10,15,30 with --profile paper)")
	fs.IntVar(&l.apps, "apps", 3, "applications elected side by side")
	fs.IntVar(&l.replicas, "replicas", 3, "replicas of each application")
	fs.Float64Var(&l.steady, "steady", 1.5, "lease durations of steady state to count requests over")
	l.k.define(fs, false)
}

// leaseTradeoffRow is one lease duration, algorithm and repetition.
type leaseTradeoffRow struct {
	Backend     string        `csv:"backend"`
	Algorithm   string        `csv:"algorithm"`
	LeaseS      float64       `csv:"lease_s"`
	Rep         int           `csv:"rep"`
	Apps        int           `csv:"apps"`
	Reelection  time.Duration `csv:"reelection_ms"`
	SteadyPerM  float64       `csv:"steady_requests_per_min"` // every application, election objects only
	ElectionReq float64       `csv:"election_requests"`       // from the kill to the new leader
	WritesPerM  float64       `csv:"steady_writes_per_min"`   // of which writes (create, update, patch, delete)
	Overlaps    int           `csv:"overlaps"`
	Seed        uint64        `csv:"seed"`
}

// electionResources are the objects an election touches: the locks, the
// BLD record, the coordinated candidates, and the Pods candidates read.
var electionResources = map[string]bool{"leases": true, "leasecandidates": true, "configmaps": true, "endpoints": true, "pods": true, "nodes": true}

func (l *LeaseTradeoff) Run(ctx context.Context, env *experiments.Env) error {
	var leases []time.Duration
	for _, sec := range experiments.Points(l.leases, env.Profile, experiments.FloatList{2, 4}, experiments.FloatList{2, 5, 10, 15, 30}) {
		leases = append(leases, time.Duration(sec*float64(time.Second)))
	}
	if l.apps < 1 || l.replicas < 2 || !(l.steady > 0) || len(leases) == 0 {
		return fmt.Errorf("kube-lease-tradeoff: --apps %d, --replicas %d (≥ 2: a leader needs a successor), --steady %v, --lease %v", l.apps, l.replicas, l.steady, leases)
	}
	for _, d := range leases {
		if d < 2*time.Second || d > 10*time.Minute || d%time.Second != 0 {
			return fmt.Errorf("kube-lease-tradeoff: --lease %s: want whole seconds from 2 to 600 (a Lease holds whole seconds)", d)
		}
	}
	c, err := start(ctx, env, &l.k)
	if err != nil {
		return err
	}
	defer c.Close()
	cells := experiments.Cells(len(leases), len(l.algs.Vals))
	// One cell at a time: the API server's counters are the cluster's.
	grid := experiments.Grid{Cells: len(cells)}
	return experiments.RunGrid(ctx, env, grid, func(ctx context.Context, tk experiments.Task) ([]leaseTradeoffRow, error) {
		d, alg := leases[cells[tk.Cell][0]], l.algs.Vals[cells[tk.Cell][1]]
		t := kube.Timing{Lease: d, Renew: d * 3 / 4, Retry: d / 4}
		row, err := againOnFailedStart(env, func() (leaseTradeoffRow, error) { return l.once(ctx, c, alg, t) },
			"algorithm", alg, "lease", d, "rep", tk.Rep)
		if err != nil {
			return nil, fmt.Errorf("%s, lease %s: %w", alg, d, err)
		}
		row.Backend, row.Algorithm, row.LeaseS, row.Rep, row.Apps, row.Seed = env.Backend, alg, d.Seconds(), tk.Rep, l.apps, tk.Seed
		return []leaseTradeoffRow{row}, nil
	})
}

func (l *LeaseTradeoff) once(ctx context.Context, c *kube.Cluster, alg string, t kube.Timing) (leaseTradeoffRow, error) {
	ns, err := c.Namespace(ctx, "tradeoff")
	if err != nil {
		return leaseTradeoffRow{}, err
	}
	defer c.StopNamespace(ns)
	names, _, err := elect(ctx, c, ns, c.WorkerNodes, l.apps, l.replicas, alg, l.k.lock, t)
	if err != nil {
		return leaseTradeoffRow{}, err
	}
	// Steady state: a lease to settle, then count.
	if err := sleep(ctx, t.Lease); err != nil {
		return leaseTradeoffRow{}, err
	}
	before, err := requestCounts(ctx, c)
	if err != nil {
		return leaseTradeoffRow{}, err
	}
	window := time.Duration(l.steady * float64(t.Lease))
	began := time.Now()
	if err := sleep(ctx, window); err != nil {
		return leaseTradeoffRow{}, err
	}
	after, err := requestCounts(ctx, c)
	if err != nil {
		return leaseTradeoffRow{}, err
	}
	minutes := time.Since(began).Minutes()
	all, writes := after.sub(before)
	row := leaseTradeoffRow{SteadyPerM: all / minutes, WritesPerM: writes / minutes}

	// One election: SIGKILL app-0's leader.
	old, err := leaderNow(ctx, c, ns, names[0], 2*t.Lease+10*time.Second)
	if err != nil {
		return leaseTradeoffRow{}, err
	}
	before, err = requestCounts(ctx, c)
	if err != nil {
		return leaseTradeoffRow{}, err
	}
	at, err := c.Signal(ctx, ns, strings.TrimPrefix(old, ns+"/"), syscall.SIGKILL)
	if err != nil {
		return leaseTradeoffRow{}, err
	}
	// BLD can starve here: with every other node leading one
	// application, N·c ≤ L refuses the survivors' nodes. Its row says
	// never (−1 ms) rather than failing the run.
	deadline := time.Now().Add(2*t.Lease + 10*time.Second)
	for {
		if id, since := c.Leader(ns, names[0]); id != "" && id != old {
			row.Reelection = since.Sub(at)
			break
		}
		if time.Now().After(deadline) {
			row.Reelection = -time.Millisecond
			break
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return leaseTradeoffRow{}, err
		}
	}
	after, err = requestCounts(ctx, c)
	if err != nil {
		return leaseTradeoffRow{}, err
	}
	row.ElectionReq, _ = after.sub(before)
	row.Overlaps = kube.Overlaps(c.Events(ns))
	return row, c.Crashed(ns)
}

// counts are apiserver_request_total by resource and verb.
type counts map[[2]string]float64

// sub returns the requests on election objects between two scrapes, and
// the writes among them.
func (a counts) sub(b counts) (all, writes float64) {
	for k, v := range a {
		if !electionResources[k[0]] {
			continue
		}
		d := v - b[k]
		all += d
		switch k[1] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
			writes += d
		}
	}
	return all, writes
}

// requestCounts scrapes the API server's own request counter.
func requestCounts(ctx context.Context, c *kube.Cluster) (counts, error) {
	raw, err := c.CS.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scrape the API server's /metrics: %w", err)
	}
	return parseRequestCounts(raw)
}

// parseRequestCounts reads apiserver_request_total from a Prometheus
// text exposition. Only that family's lines are parsed: the API server's
// whole exposition is mostly histograms, and kube-election-latency scrapes
// it twice per election set.
func parseRequestCounts(raw []byte) (counts, error) {
	var family []byte
	for line := range bytes.Lines(raw) {
		name := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("# HELP ")), []byte("# TYPE "))
		if rest, ok := bytes.CutPrefix(name, []byte("apiserver_request_total")); ok && len(rest) > 0 && (rest[0] == '{' || rest[0] == ' ') {
			family = append(family, line...)
		}
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(family))
	if err != nil {
		return nil, fmt.Errorf("the API server's metrics: %w", err)
	}
	fam, ok := fams["apiserver_request_total"]
	if !ok {
		return nil, fmt.Errorf("the API server's metrics have no apiserver_request_total")
	}
	out := counts{}
	for _, m := range fam.GetMetric() {
		var resource, verb string
		for _, lp := range m.GetLabel() {
			switch lp.GetName() {
			case "resource":
				resource = lp.GetValue()
			case "verb":
				verb = lp.GetValue()
			}
		}
		v := m.GetCounter().GetValue()
		if m.Untyped != nil { // an exposition without its TYPE line
			v = m.GetUntyped().GetValue()
		}
		k := [2]string{resource, verb}
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || math.IsInf(out[k]+v, 0) {
			return nil, fmt.Errorf("the API server's metrics: apiserver_request_total{resource=%q,verb=%q} %v is no count", resource, verb, v)
		}
		out[k] += v
	}
	return out, nil
}

func (l *LeaseTradeoff) Report(in *experiments.ReportInput) (string, error) {
	t := in.Table
	var rows [][]string
	var lines experiments.Lines
	for _, g := range t.GroupBy("algorithm", "lease_s") {
		alg, lease := g.Key[0], g.Key[1]
		var elected []float64
		for _, v := range t.Floats(g.Rows, "reelection_ms") {
			if v >= 0 {
				elected = append(elected, v)
			}
		}
		re := experiments.Summarize(elected)
		steady := experiments.Summarize(t.Floats(g.Rows, "steady_requests_per_min"))
		writes := experiments.Summarize(t.Floats(g.Rows, "steady_writes_per_min"))
		per := experiments.Summarize(t.Floats(g.Rows, "election_requests"))
		overlaps := 0
		for _, v := range t.Floats(g.Rows, "overlaps") {
			overlaps += int(v)
		}
		apps := t.Float(g.Rows[0], "apps")
		p50 := "never"
		if re.N > 0 {
			p50 = experiments.Num(re.P50, 0)
			lines.Of(alg).Point(steady.Mean/apps, re.P50/1000, math.NaN(), math.NaN())
		}
		span := "—"
		if l, err := strconv.ParseFloat(lease, 64); err == nil {
			span = expectedReelection(alg, time.Duration(l*float64(time.Second)))
		}
		rows = append(rows, []string{alg, lease + " s", fmt.Sprintf("%d of %d", re.N, len(g.Rows)), p50, span,
			experiments.Num(steady.Mean, 0), experiments.Num(steady.Mean/apps, 1), experiments.Num(writes.Mean/apps, 1), experiments.Num(per.Mean, 0), strconv.Itoa(overlaps)})
	}
	fig, err := in.Figure("tradeoff", "re-election time against API requests", experiments.Line(experiments.Axes{
		Title: "the lease trade-off: shorter leases fail over faster and cost more requests", X: "API requests per minute per application (steady state)", Y: "re-election after SIGKILL (s, p50)"}, lines.List))
	if err != nil {
		return "", err
	}
	out := experiments.MarkdownTable([]string{"algorithm", "lease", "re-elected", "re-election p50 ms", "expected ms", "steady requests / min",
		"per application", "of which writes", "requests per election", "overlaps"}, rows)
	out += "\n" + fig + "\n\n"
	out += "Requests are the API server's own count (apiserver_request_total) on the objects elections touch — Leases, LeaseCandidates, the BLD record's ConfigMap, Endpoints, Pods and Nodes — over a steady window after every application elected, and from a SIGKILL of one leader until its successor led (every application's traffic over that span: compare it with the steady rate × the re-election time). " +
		"Renew deadline and retry period are ¾ and ¼ of each lease. *expected*: where the default re-elects after a SIGKILL by client-go's own algorithm — L − RP to L + 4.4·RP (see clientGoReelection); cle-balanced no sooner than L − RP (the Lease runs out L after the leader's last renewal, at most RP before the kill), plus the controller's reaction, which has no fixed bound. *never*: no successor within two leases and 10 s — BLD's rule N·c ≤ L refuses every survivor when each other node already leads an application. The default election renews every retry period and its followers read the lock as often; a cle-balanced follower only watches its Lease, and the controller writes once per election.\n"
	return out, nil
}

// expectedReelection is the theory's re-election time after a SIGKILL
// for alg at lease L, as the report shows it: client-go's span for the
// default; for cle-balanced only its floor, L − RP (the leader renews
// every retry period like client-go's, and the controller names a
// successor once the Lease has run out); "—" where there is none.
func expectedReelection(alg string, lease time.Duration) string {
	lo, hi := clientGoReelection(lease)
	switch alg {
	case balance.Default:
		return experiments.Num(experiments.Ms(lo), 0) + "–" + experiments.Num(experiments.Ms(hi), 0)
	case balance.CLEBalanced:
		return "≥ " + experiments.Num(experiments.Ms(lo), 0)
	}
	return "—"
}

// clientGoReelection is the span in which client-go's election re-elects
// after its leader is killed, for lease L and retry period RP = L/4: the
// last renewal was up to RP before the kill; a follower counts the lease
// from when it saw that renewal (it polls every RP to 2.2·RP, client-go's
// jitter factor 1.2) and takes the lease at its first poll after expiry —
// from L − RP (renewed RP before the kill, seen at once, polled at expiry)
// to L + 4.4·RP (renewed at the kill, seen a whole poll late, expiry just
// after a poll).
func clientGoReelection(lease time.Duration) (lo, hi time.Duration) {
	rp := lease / 4
	return lease - rp, lease + rp*44/10
}
