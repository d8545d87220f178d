package kubeexp

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ringside/ringside/bld"
	"github.com/ringside/ringside/bld/balance"
	"github.com/ringside/ringside/experiments"
)

// Latency is kube-election-latency: election start to OnStartedLeading,
// per algorithm and application count (BLD paper Table 2).
type Latency struct {
	elections
	k kubeFlags
	// together holds every candidate's campaign until this long after its
	// election set's deployment began (0: each campaigns once it runs).
	together time.Duration
}

func (*Latency) Spec() experiments.Spec {
	return experiments.Spec{Name: "kube-election-latency", Backends: backends, Quick: 5, Paper: 100, Row: latencyRow{},
		Summary: "election latency (candidates started → OnStartedLeading) per algorithm and application count, beside the BLD paper's Table 2"}
}

func (l *Latency) Flags(fs *flag.FlagSet) {
	l.elections.define(fs, balance.Default, balance.BLD, balance.BLDOptimistic, balance.BLDPlus, balance.Ranked, balance.CLEBalanced)
	l.k.define(fs, false)
	fs.DurationVar(&l.together, "campaign-together", 0, "start every candidate first and hold its campaign until this long after the election set's deployment began, "+
		"so that the elections are timed without the platform's start-up spread (bld-optimistic's candidates build their view of the Leases while held; "+
		"0: each candidate campaigns once it runs; make it longer than the candidates take to start: "+
		"20s covered 35 Pods on kind on one host, 30s did not on a slower one where 60s did, 3s 35 processes); a candidate that starts later campaigns at once, which campaign_spread_ms and the report show")
}

// latencyRow is one application's election.
type latencyRow struct {
	Backend   string  `csv:"backend"`
	Algorithm string  `csv:"algorithm"`
	Apps      int     `csv:"apps"`
	Rep       int     `csv:"rep"`
	App       string  `csv:"app"`
	Latency   float64 `csv:"latency_ms"`
	Campaign  float64 `csv:"campaign_latency_ms"`
	// From the leader's own campaign start: the election's API work
	// alone, without the wait for a candidate the algorithm accepts to
	// start (on kind, containers start seconds apart).
	Own float64 `csv:"leader_campaign_latency_ms"`
	// cle-balanced only: from the leader's own campaign start until the
	// controller named it.
	Named float64 `csv:"leader_named_ms"`
	// How many of the application's candidates began their campaign
	// before the leader did (0: the first to campaign led).
	Before float64 `csv:"campaigned_before_leader"`
	// 1 when the application's candidate launched first was the first to
	// campaign, 0 when not; NaN where candidates are not launched one by
	// one (on Kubernetes the application's Pods are created at once).
	LaunchOrder float64 `csv:"first_launched_campaigned_first"`
	// From the application's first candidate's campaign start to its
	// last's: how far apart its candidates start, which an algorithm that
	// waits for its choice (BLD's rule) pays and the default does not.
	Spread float64 `csv:"campaign_spread_ms"`
	// From the first candidate's campaign start until the algorithm's
	// placement rule first admitted a campaigning candidate, given where
	// the other applications' leaders were then: the least wait any
	// implementation of the rule would have had here (0: the default).
	RuleWait float64 `csv:"rule_wait_ms"`
	// --campaign-together: how long after the deployment the candidates
	// were held to campaign together (0: each campaigned once it ran).
	Together float64 `csv:"campaign_together_ms"`
	// --campaign-together: from that instant to the leader's start (NaN
	// without a hold); a leader that did not wait for it would read below
	// 0. On a loaded machine the Pods' start-up may take the hold's whole
	// length, so latency_ms alone cannot tell.
	AfterInstant float64 `csv:"leader_after_instant_ms"`
	Overlaps     int     `csv:"overlaps"`
	Elected      bool    `csv:"elected"`
	// Leaders on the fullest worker node less the emptiest's, once the
	// repetition's elections settled.
	Imbalance int `csv:"max_minus_min"`
	// The API server's requests (and writes) on election objects per
	// application, from the deployment until every one led: the cost of
	// the whole set's elections over its size.
	Requests float64 `csv:"api_requests"`
	Writes   float64 `csv:"api_writes"`
	Seed     uint64  `csv:"seed"`
}

func (l *Latency) Run(ctx context.Context, env *experiments.Env) error {
	if l.together < 0 || l.together > bld.MaxCampaignWait {
		return fmt.Errorf("--campaign-together %s: want 0 (off) up to %s", l.together, bld.MaxCampaignWait)
	}
	c, err := start(ctx, env, &l.k)
	if err != nil {
		return err
	}
	defer c.Close()
	// One election set at a time, the algorithms side by side within each
	// repetition and in a rotated order, so that neither the machine's
	// drift (etcd and the API server's caches grow with every namespace)
	// nor a neighbour's CPU load favours one algorithm.
	algs := l.algs.Vals
	return experiments.RunGrid(ctx, env, experiments.Grid{Cells: len(l.apps), Interleave: true}, func(ctx context.Context, t experiments.Task) ([]latencyRow, error) {
		n := l.apps[t.Cell]
		var rows []latencyRow
		for i := range algs {
			alg := algs[(t.Rep+i)%len(algs)]
			r, err := againOnFailedStart(env, func() (spreadResult, error) {
				return spread(ctx, c, alg, l.k.lock, n, l.replicas, l.timing, l.settle, true, l.together)
			}, "algorithm", alg, "apps", n, "rep", t.Rep)
			if err != nil {
				return nil, fmt.Errorf("%s, %d apps: %w", alg, n, err)
			}
			// An application that never elected is a row too, with no
			// latency: dropping it would flatter the algorithm.
			for _, a := range r.apps {
				row := latencyRow{Backend: env.Backend, Algorithm: alg, Apps: n, Rep: t.Rep, App: a,
					Latency: math.NaN(), Campaign: math.NaN(), Own: math.NaN(), Named: math.NaN(), Before: math.NaN(), LaunchOrder: math.NaN(), Spread: math.NaN(), RuleWait: math.NaN(), AfterInstant: math.NaN(), Together: experiments.Ms(l.together), Overlaps: r.overlaps, Seed: t.Seed, Imbalance: r.imbalance(c.WorkerNodes),
					Requests: r.requests / float64(n), Writes: r.writes / float64(n)}
				if d, ok := r.launch[a]; ok {
					row.Latency, row.Campaign, row.Own, row.Elected = experiments.Ms(d), experiments.Ms(r.campaign[a]), experiments.Ms(r.own[a]), true
					row.Before = float64(r.before[a])
					row.Spread = experiments.Ms(r.spread[a])
					if after, ok := r.afterInstant[a]; ok {
						row.AfterInstant = experiments.Ms(after)
					}
					if w, ok := r.ruleWait[a]; ok {
						row.RuleWait = experiments.Ms(w)
					}
					if nd, ok := r.named[a]; ok {
						row.Named = experiments.Ms(nd)
					}
				}
				if kept, ok := r.launchOrder[a]; ok {
					row.LaunchOrder = 0
					if kept {
						row.LaunchOrder = 1
					}
				}
				rows = append(rows, row)
			}
		}
		return rows, nil
	})
}

// paperLatency is the BLD paper's Table 2 (mean, std, min, max in ms).
var paperLatency = map[string]map[int][4]float64{
	balance.Default: {3: {11.91, 4.65, 5, 30}, 5: {12.44, 5.71, 5, 37}, 7: {11.92, 5, 5, 52}},
	balance.BLD:     {3: {34.46, 10.51, 13, 64}, 5: {33.41, 10.32, 13, 67}, 7: {33.77, 10.93, 12, 87}},
}

func (l *Latency) Report(in *experiments.ReportInput) (string, error) {
	t := in.Table
	var rows [][]string
	var lines experiments.Lines
	neverElected := 0
	worstImbalance := map[string]int{}
	for _, g := range t.GroupBy("algorithm", "apps") {
		alg, apps := g.Key[0], g.Key[1]
		n, _ := strconv.Atoi(apps)
		s := experiments.Summarize(t.Floats(g.Rows, "latency_ms"))
		cs := experiments.Summarize(t.Floats(g.Rows, "campaign_latency_ms"))
		own := "–"
		if t.Has("leader_campaign_latency_ms") {
			own = experiments.Num(experiments.Summarize(t.Floats(g.Rows, "leader_campaign_latency_ms")).Mean, 2)
		}
		paper := "–"
		if p, ok := paperLatency[alg][n]; ok {
			paper = fmt.Sprintf("%s (std %s, %s–%s)", experiments.Num(p[0], 2), experiments.Num(p[1], 2), experiments.Num(p[2], 0), experiments.Num(p[3], 0))
		}
		overlaps := 0
		for _, v := range t.Floats(g.Rows, "overlaps") {
			overlaps += int(v)
		}
		never := len(g.Rows) - s.N
		neverElected += never
		imbalance := "–"
		if vals := t.Floats(g.Rows, "max_minus_min"); t.Has("max_minus_min") && len(vals) > 0 {
			w := int(slices.Max(vals))
			worstImbalance[alg] = max(worstImbalance[alg], w)
			imbalance = strconv.Itoa(w)
		}
		cost := "–"
		if t.Has("api_requests") {
			if r := experiments.Summarize(t.Floats(g.Rows, "api_requests")); r.N > 0 {
				cost = experiments.Num(r.Mean, 1) + " (" + experiments.Num(experiments.Summarize(t.Floats(g.Rows, "api_writes")).Mean, 1) + ")"
			}
		}
		rows = append(rows, []string{alg, apps, strconv.Itoa(s.N), strconv.Itoa(never), experiments.Num(s.Mean, 2), experiments.Num(s.Std, 2),
			experiments.Num(s.Min, 1), experiments.Num(s.Max, 1), experiments.Num(cs.Mean, 2), experiments.Num(cs.P99, 2), own, paper, cost, imbalance, strconv.Itoa(overlaps)})
		y, lo, hi := s.MeanSpread()
		lines.Of(alg).Point(float64(n), y, lo, hi)
	}
	for _, alg := range slices.Sorted(maps.Keys(paperLatency)) { // colours must not follow map order
		p := paperLatency[alg]
		s := lines.Of("paper " + alg)
		s.Dashed = true
		for _, n := range []int{3, 5, 7} {
			s.X, s.Y = append(s.X, float64(n)), append(s.Y, p[n][0])
		}
	}
	fig, err := in.Figure("latency", "latency", experiments.Line(experiments.Axes{Title: "leader election latency", X: "applications", Y: "ms (mean ± std)"}, lines.List))
	if err != nil {
		return "", err
	}
	out := experiments.MarkdownTable([]string{"algorithm", "apps", "elections", "never elected", "mean ms", "std", "min", "max",
		"from campaign start: mean ms", "p99", "from the leader's own campaign start: mean ms", "paper Table 2 mean (std, min–max)", "API requests per election (writes)", "max − min (worst rep)", "overlaps"}, rows)
	out += "\n" + fig + "\n\n"
	overall := map[string][3]float64{} // algorithm → mean latency, mean from campaign, from the leader's own
	for _, g := range t.GroupBy("algorithm") {
		o := math.NaN()
		if t.Has("leader_campaign_latency_ms") {
			o = experiments.Summarize(t.Floats(g.Rows, "leader_campaign_latency_ms")).Mean
		}
		overall[g.Key[0]] = [3]float64{experiments.Summarize(t.Floats(g.Rows, "latency_ms")).Mean,
			experiments.Summarize(t.Floats(g.Rows, "campaign_latency_ms")).Mean, o}
	}
	// Each target's verdict rests on the ratio's bootstrap interval over
	// the run's (applications, repetition) groups, not on the pooled ratio
	// alone: one binary's ratio swings widely between runs.
	seed := in.Meta.Seed
	if d, ok := overall[balance.Default]; ok {
		if b, ok := overall[balance.BLD]; ok {
			_, lo, hi := ratioToDefault(t, balance.BLD, "latency_ms", seed)
			out += fmt.Sprintf("BLD / default mean latency: %s (from process start, the DESIGN's definition; target ≤ 1.3 with every application elected: %s); %s from campaign start. The paper's ratio is 2.8 (34 / 12 ms).\n\n",
				experiments.Num(b[0]/d[0], 2), allElected(neverElected, experiments.JudgeInterval(lo, hi, 1.3)), experiments.Num(b[1]/d[1], 2))
		}
		if o, ok := overall[balance.BLDOptimistic]; ok {
			spread := "max − min unknown"
			w, known := worstImbalance[balance.BLDOptimistic]
			if known {
				spread = fmt.Sprintf("max − min ≤ %d leaders across the nodes in every repetition", w)
			}
			bldOwn := math.NaN()
			if b, ok := overall[balance.BLD]; ok {
				bldOwn = b[2] / d[2]
			}
			_, lo, hi := ratioToDefault(t, balance.BLDOptimistic, "campaign_latency_ms", seed)
			verdict := experiments.JudgeInterval(lo, hi, 1.2)
			if !known || w > 1 {
				verdict = "**missed** (max − min over 1)"
			}
			out += fmt.Sprintf("bld-optimistic / default mean latency from campaign start: %s, with %s (target ≤ 1.2 and ≤ 1 with every application elected: %s); %s from process start; %s from the leader's own campaign start (bld / default: %s).\n\n",
				experiments.Num(o[1]/d[1], 2), spread, allElected(neverElected, verdict), experiments.Num(o[0]/d[0], 2),
				experiments.Num(o[2]/d[2], 2), experiments.Num(bldOwn, 2))
		}
		if c, ok := overall[balance.CLEBalanced]; ok {
			_, lo, hi := ratioToDefault(t, balance.CLEBalanced, "campaign_latency_ms", seed)
			out += fmt.Sprintf("cle-balanced / default mean latency from campaign start: %s (target ≤ 1.2: %s); %s from the leader's own campaign start.\n\n",
				experiments.Num(c[1]/d[1], 2), allElected(neverElected, experiments.JudgeInterval(lo, hi, 1.2)), experiments.Num(c[2]/d[2], 2))
		}
	}
	if d, ok := overall[balance.Default]; ok {
		out += ruleFloor(t, d[1], d[2])
	}
	out += campaignTogether(t)
	out += cleBreakdown(t)
	out += campaignOrder(t)
	if neverElected > 0 {
		out += fmt.Sprintf("**%d application elections never produced a leader within --settle**; their rows have no latency and the means above leave them out.\n\n", neverElected)
	}
	out += "*latency* runs from the launch of an application's first elector process to its leader's OnStartedLeading; *from campaign start* excludes process start-up and client set-up, timing only the API calls of the election; " +
		"*from the leader's own campaign start* leaves out, too, the wait for a candidate the algorithm accepts to start (BLD's rule refuses candidates on crowded nodes, and on kind an application's containers start seconds apart). " +
		"*API requests per election* are the API server's own count (apiserver_request_total) of requests on election objects — locks, the BLD record, LeaseCandidates, the Pods and Nodes candidates read — " +
		"from the deployment until every application led, over the applications (the Pods' creation left out; the cle-balanced controller's and every candidate's requests in; a watch counts when it ends, so the watches still open then, such as bld-optimistic's, are not in).\n"
	return out, nil
}

// campaignTogether says whether the candidates were held to campaign
// together (--campaign-together), and how far apart they still began.
func campaignTogether(t *experiments.Table) string {
	if !t.Has("campaign_together_ms") {
		return ""
	}
	var held, spreads, after []float64
	for i := range t.Rows {
		if h := t.Float(i, "campaign_together_ms"); h > 0 {
			held = append(held, h)
			if t.Has("campaign_spread_ms") {
				spreads = append(spreads, t.Float(i, "campaign_spread_ms"))
			}
			if a := t.Float(i, "leader_after_instant_ms"); !math.IsNaN(a) {
				after = append(after, a) // NaN: not elected, or a CSV from before the column
			}
		}
	}
	if len(held) == 0 {
		return ""
	}
	out := fmt.Sprintf("In %d of %d rows every candidate started first and was held to campaign at one instant, %s s after its election set's deployment began (--campaign-together): "+
		"*from campaign start* there times the algorithms from a common instant, without the platform's start-up spread. "+
		"A started candidate has what it keeps while it stands: bld-optimistic's its view of the Leases, listed and watched while it waits (as for every election after the first), "+
		"so its first read there is the view's; client-go's elector keeps nothing and reads its lock at the instant.", len(held), len(t.Rows), experiments.Num(slices.Max(held)/1000, 1))
	if s := experiments.Summarize(spreads); s.N > 0 {
		out += fmt.Sprintf(" From an application's first campaign start to its last's there: mean %s ms, at most %s (a candidate that started after the instant campaigned late, at once).",
			experiments.Num(s.Mean, 1), experiments.Num(s.Max, 1))
		if late := outranHold(spreads); late > 0 {
			out += fmt.Sprintf(" **In %d of %d held elections a candidate began its campaign over %s s after its application's first**: it started after the instant, "+
				"so there *from campaign start* includes its start-up (and, for an algorithm that waits for it, the wait), not the election alone; "+
				"a --campaign-together longer than the candidates take to start on this machine times the elections alone.",
				late, len(spreads), experiments.Num(lateCampaign.Seconds(), 0))
		}
	}
	if s := experiments.Summarize(after); s.N > 0 {
		out += fmt.Sprintf(" The leaders started %s ms after the instant on average, %s at the earliest (below 0 would be a leader that did not wait).",
			experiments.Num(s.Mean, 1), experiments.Num(s.Min, 1))
	}
	return out + "\n\n"
}

// lateCampaign is how far behind its application's first a held
// candidate's campaign may begin and still have started before the
// instant: held candidates wake together, and with 35 Pods held to one
// instant on a slow 2-core host an application's candidates began at most
// 0.634 s apart (kind, docs/bld-optimistic.md, 2026-12-07); one that began
// a second later was still starting.
const lateCampaign = time.Second

// outranHold counts the held elections whose candidates began their
// campaigns further apart than lateCampaign: the hold was shorter than
// one of them took to start.
func outranHold(spreadsMs []float64) int {
	n := 0
	for _, s := range spreadsMs {
		if s > float64(lateCampaign.Milliseconds()) {
			n++
		}
	}
	return n
}

// campaignOrder says, per algorithm, how often the leader was the first
// of its application's candidates to campaign: the difference between the
// latency from campaign start and from the leader's own is the wait for a
// later candidate, the one an algorithm that chooses (BLD's node rule,
// cle-balanced's controller) chose.
func campaignOrder(t *experiments.Table) string {
	if !t.Has("campaigned_before_leader") {
		return ""
	}
	var parts, spreads []string
	var launchOrder []float64
	for _, g := range t.GroupBy("algorithm") {
		launchOrder = append(launchOrder, t.Floats(g.Rows, "first_launched_campaigned_first")...)
		if t.Has("campaign_spread_ms") {
			spreads = append(spreads, g.Key[0]+" "+experiments.Num(experiments.Summarize(t.Floats(g.Rows, "campaign_spread_ms")).Mean, 1))
		}
		before := t.Floats(g.Rows, "campaigned_before_leader")
		if len(before) == 0 {
			continue
		}
		first := 0 // elections whose leader campaigned first
		for _, v := range before {
			if v == 0 {
				first++
			}
		}
		parts = append(parts, fmt.Sprintf("%s %s %% (%s)", g.Key[0], experiments.Num(100*float64(first)/float64(len(before)), 0), experiments.Num(experiments.Summarize(before).Mean, 2)))
	}
	if len(parts) == 0 {
		return ""
	}
	out := "The leader was the first of its application's candidates to campaign in " + strings.Join(parts, ", ") +
		" of the elections (in brackets: how many of them began before it, mean). The default elects whichever candidate's request reaches the API server first; " +
		"an algorithm that chooses waits for its choice to start."
	if len(spreads) > 0 {
		out += " From an application's first candidate's campaign start to its last's, mean ms: " + strings.Join(spreads, ", ") + "."
	}
	if s := experiments.Summarize(launchOrder); s.N > 0 {
		out += fmt.Sprintf(" The candidate launched first was the first to campaign in %s %% of %d elections: the order of the launches does not foretell the campaigns' (a choice among the earliest-launched would not wait less).",
			experiments.Num(100*s.Mean, 0), s.N)
	}
	return out + "\n\n"
}

// ruleFloor says, per algorithm whose placement rule can refuse a
// candidate, how long its rule kept every campaigning candidate out
// (rule_wait_ms) and the least latency from campaign start that wait
// leaves any implementation of the rule: the wait, then an election as
// quick as the default's from its leader's own campaign start (own ms),
// over the default's from campaign start (campaign ms).
func ruleFloor(t *experiments.Table, campaign, own float64) string {
	if !t.Has("rule_wait_ms") {
		return ""
	}
	var parts []string
	for _, g := range t.GroupBy("algorithm") {
		alg := g.Key[0]
		w := experiments.Summarize(t.Floats(g.Rows, "rule_wait_ms"))
		if !balance.Balanced(alg) || w.N == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s ms (p90 %s; floor %s)", alg, experiments.Num(w.Mean, 2), experiments.Num(w.P90, 2), experiments.Num((w.Mean+own)/campaign, 2)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "How long the placement rule refused every candidate that had begun to campaign, from the application's first campaign start, given where the other applications' leaders were by then (mean): " +
		strings.Join(parts, ", ") + ". The floor estimates the least ratio to the default from campaign start that any implementation of that rule could reach with these start times: " +
		"the rule's wait, then an election as quick as the default's from its leader's own campaign start (" + experiments.Num(own, 2) + " ms). " +
		"It counts each leader from its start, a little after its Lease was written (the elections order themselves by the writes).\n\n"
}

// cleBreakdown splits cle-balanced's latency from the leader's own
// campaign start at the controller's naming: before it, the candidate's
// registration and the controller's watch and choice; after it, the
// controller's write and its watch event at the candidate.
func cleBreakdown(t *experiments.Table) string {
	if !t.Has("leader_named_ms") {
		return ""
	}
	var named, after []float64
	for i := range t.Rows {
		n, own := t.Float(i, "leader_named_ms"), t.Float(i, "leader_campaign_latency_ms")
		if t.Str(i, "algorithm") == balance.CLEBalanced && !math.IsNaN(n) && !math.IsNaN(own) {
			named, after = append(named, n), append(after, own-n)
		}
	}
	if len(named) == 0 {
		return ""
	}
	n, a := experiments.Summarize(named), experiments.Summarize(after)
	return fmt.Sprintf("cle-balanced, from the leader's own campaign start (%d elections): the controller named it after %s ms (mean; p50 %s; "+
		"negative: before the candidate started, named from its Pod), "+
		"and it led %s ms (mean; p50 %s) after that — its Lease's acquireTime, written by the controller, splits the two.\n\n",
		n.N, experiments.Num(n.Mean, 2), experiments.Num(n.P50, 2), experiments.Num(a.Mean, 2), experiments.Num(a.P50, 2))
}

// ratioToDefault is alg's mean of col over the default's, with its 95 %
// bootstrap interval: the groups are the run's (applications,
// repetition) cells, in which the algorithms ran side by side.
func ratioToDefault(t *experiments.Table, alg, col string, seed uint64) (ratio, lo, hi float64) {
	var num, den [][]float64
	for _, g := range t.GroupBy("apps", "rep") {
		var a, d []float64
		for _, i := range g.Rows {
			switch t.Str(i, "algorithm") {
			case alg:
				a = append(a, t.Float(i, col))
			case balance.Default:
				d = append(d, t.Float(i, col))
			}
		}
		num, den = append(num, a), append(den, d)
	}
	return experiments.RatioInterval(num, den, seed)
}

// allElected is a latency target's verdict, missed whenever an
// application went without a leader (its latency would flatter the mean).
func allElected(neverElected int, verdict string) string {
	if neverElected > 0 {
		return fmt.Sprintf("**missed** (%d elections without a leader)", neverElected)
	}
	return verdict
}
