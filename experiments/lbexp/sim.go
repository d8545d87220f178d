package lbexp

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ringside/ringside/balancer/lbsim"
	"github.com/ringside/ringside/balancer/pick"
	"github.com/ringside/ringside/experiments"
)

// Sim is lb-sim: every picker in front of N heterogeneous servers in the
// seeded discrete-event simulation of package lbsim, at several loads.
type Sim struct {
	pickers          experiments.ChoiceList
	ns               experiments.IntList
	utils, caps      experiments.FloatList
	slots, queue     int
	service, dur     time.Duration
	warmUp, probeRTT time.Duration
	noisy            float64
	tuning           pick.Tuning
}

// Sources names where each picker comes from, for the report.
var Sources = map[string]string{
	pick.WeightedRandom: "seed 004 (alias method)",
	pick.SmoothWRR:      "nginx smooth weighted round robin",
	pick.RoundRobin:     "round robin",
	pick.LeastConn:      "least connections (nginx, HAProxy)",
	pick.P2C:            "power of two choices on requests in flight (Mitzenmacher)",
	pick.P2CPeakEWMA:    "Finagle / linkerd: P2C on peak-EWMA latency × (in flight + 1)",
	pick.LeastRequest:   "Envoy least_request (active_request_bias, choice_count)",
	pick.LoadReportWRR:  "gRPC A58 weighted_round_robin on ORCA load reports",
	pick.Prequal:        "Prequal (Wydrowski et al., NSDI 2024): probes, hot-cold rule",
}

func (*Sim) Spec() experiments.Spec {
	return experiments.Spec{Name: "lb-sim", Backends: []string{"sim"}, Quick: 2, Paper: 5, Row: simRow{},
		Summary: "every picker before N ∈ {4, 16, 100, 1000} heterogeneous servers (one slowed mid-run) at 80 and 95 % load (and 50 % in the paper profile), simulated: p50/p99/p99.9 latency, drops, η"}
}

func (s *Sim) Flags(fs *flag.FlagSet) {
	s.pickers = experiments.ChoiceList{Vals: pick.Algorithms, Allowed: pick.Algorithms}
	s.ns = experiments.IntList{4, 16, 100, 1000}
	s.caps = experiments.FloatList{1, 2, 4}
	fs.Var(&s.pickers, "pickers", "pickers, comma-separated")
	fs.Var(&s.ns, "n", "numbers of servers, comma-separated")
	fs.Var(&s.utils, "util", "offered load over nominal capacity, comma-separated (default: 0.8,0.95 quick — the loads the goal is judged at; 0.5,0.8,0.95 paper)")
	fs.Var(&s.caps, "capacities", "server capacities each server draws one of (relative speeds)")
	fs.IntVar(&s.slots, "slots", 2, "requests a server serves at once")
	fs.IntVar(&s.queue, "queue", 200, "requests a server queues beyond its slots (more are dropped)")
	fs.DurationVar(&s.service, "service", 10*time.Millisecond, "mean service time at capacity 1 (exponential)")
	fs.DurationVar(&s.dur, "duration", 10*time.Second, "simulated time of arrivals per run")
	fs.DurationVar(&s.warmUp, "warm-up", time.Second, "requests arriving before this are not measured")
	fs.Float64Var(&s.noisy, "noisy-factor", 0.25, "server 0's capacity drops to this fraction at half time (1: no noisy neighbour)")
	fs.DurationVar(&s.probeRTT, "probe-rtt", 200*time.Microsecond, "round trip of a prequal probe")
	s.tuning.Define(fs, "")
	// gRPC's 10 s blackout would outlast a 10 s run: weights from reports
	// would never be used. One second keeps its purpose (no weight on a
	// single sample) at the simulation's time scale.
	fs.Lookup("blackout").DefValue = "1s"
	fs.Set("blackout", "1s")
}

// simRow is one picker's run at one load.
type simRow struct {
	Picker      string        `csv:"picker"`
	N           int           `csv:"n"`
	Utilisation float64       `csv:"utilisation"`
	Rep         int           `csv:"rep"`
	Seed        uint64        `csv:"seed"`
	Requests    int           `csv:"requests"`
	Dropped     int           `csv:"dropped"`
	P50         time.Duration `csv:"p50_ms"`
	P99         time.Duration `csv:"p99_ms"`
	P999        time.Duration `csv:"p999_ms"`
	Mean        time.Duration `csv:"mean_ms"`
	Eta         float64       `csv:"eta"`
	Events      int           `csv:"events"`
}

// offeredRow is a run's tail over every offered request, a drop counted
// as never answered (+Inf when the quantile falls among the drops), in
// lb-sim-offered.csv beside the main CSV's tail over served requests.
type offeredRow struct {
	Picker      string  `csv:"picker"`
	N           int     `csv:"n"`
	Utilisation float64 `csv:"utilisation"`
	Rep         int     `csv:"rep"`
	Seed        uint64  `csv:"seed"`
	Offered     int     `csv:"offered"`
	Dropped     int     `csv:"dropped"`
	P99         float64 `csv:"p99_ms"`
	P999        float64 `csv:"p999_ms"`
}

// offeredMs is an offered quantile in ms, +Inf for an unanswered one.
func offeredMs(d time.Duration) float64 {
	if d == lbsim.Unanswered {
		return math.Inf(1)
	}
	return experiments.Ms(d)
}

func (s *Sim) Run(ctx context.Context, env *experiments.Env) error {
	if s.noisy <= 0 || s.noisy > 1 {
		return fmt.Errorf("noisy-factor %v: want (0, 1]", s.noisy)
	}
	offered, err := env.CSV("offered", offeredRow{})
	if err != nil {
		return err
	}
	type cell struct {
		picker string
		n      int
		util   float64
	}
	var cells []cell
	utils := experiments.Points(s.utils, env.Profile, experiments.FloatList{0.8, 0.95}, experiments.FloatList{0.5, 0.8, 0.95})
	for _, n := range s.ns {
		for _, u := range utils {
			for _, p := range s.pickers.Vals {
				cells = append(cells, cell{p, n, u})
			}
		}
	}
	var simulated int64
	tails := make([]offeredRow, len(cells)*env.Reps) // by task, written in order after the grid
	start := time.Now()
	// Every picker of a load level meets the same servers and arrivals.
	grid := experiments.Grid{Cells: len(cells), SameSeed: len(s.pickers.Vals), Parallel: experiments.AllCPUs}
	err = experiments.RunGrid(ctx, env, grid, func(_ context.Context, t experiments.Task) ([]simRow, error) {
		c := cells[t.Cell]
		caps := s.capacities(c.n, t.Seed)
		noisy := 0
		if s.noisy == 1 {
			noisy = -1
		}
		r, err := lbsim.Run(lbsim.Config{Picker: c.picker, Capacities: caps, Slots: s.slots, QueueLimit: s.queue,
			Service: s.service, Utilisation: c.util, Duration: s.dur, WarmUp: s.warmUp, Noisy: noisy,
			NoisyFactor: s.noisy, ProbeRTT: s.probeRTT, Tuning: s.tuning}, t.Seed)
		if err != nil {
			return nil, err
		}
		atomic.AddInt64(&simulated, int64(r.Requests)) // drops included
		tails[t.Cell*env.Reps+t.Rep] = offeredRow{Picker: c.picker, N: c.n, Utilisation: c.util, Rep: t.Rep, Seed: t.Seed,
			Offered: r.Requests, Dropped: r.Dropped, P99: offeredMs(r.OfferedP99), P999: offeredMs(r.OfferedP999)}
		return []simRow{{Picker: c.picker, N: c.n, Utilisation: c.util, Rep: t.Rep, Seed: t.Seed, Requests: r.Requests,
			Dropped: r.Dropped, P50: r.P50, P99: r.P99, P999: r.P999, Mean: r.Mean, Eta: Eta(r.PerServer, caps), Events: r.Events}}, nil
	})
	if err != nil {
		return err
	}
	for _, r := range tails {
		if err := offered.Write(r); err != nil {
			return err
		}
	}
	wall := time.Since(start).Seconds()
	env.Log.Info("lb-sim speed", "measured_requests", simulated, "wall_s", wall, "requests_per_s", float64(simulated)/wall)
	return nil
}

// capacities draws each server's capacity from the list.
func (s *Sim) capacities(n int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 0xca9))
	out := make([]float64, n)
	for i := range out {
		out[i] = s.caps[rng.IntN(len(s.caps))]
	}
	return out
}

func (s *Sim) Report(in *experiments.ReportInput) (string, error) {
	t := in.Table
	if err := t.Require("picker", "n", "utilisation", "p999_ms", "p99_ms"); err != nil {
		return "", err
	}
	var pickers []string
	for _, g := range t.GroupBy("picker") {
		pickers = append(pickers, g.Key[0])
	}
	type key struct{ n, util, picker string }
	mean := map[key][2]float64{} // p99, p99.9 over reps
	p999 := map[key][]float64{}  // by repetition
	drops := map[key]float64{}
	var cells [][2]string
	for _, g := range t.GroupBy("n", "utilisation", "picker") {
		k := key{g.Key[0], g.Key[1], g.Key[2]}
		mean[k] = [2]float64{experiments.Summarize(t.Floats(g.Rows, "p99_ms")).Mean, experiments.Summarize(t.Floats(g.Rows, "p999_ms")).Mean}
		p999[k] = t.Floats(g.Rows, "p999_ms")
		req, drop := 0.0, 0.0
		for _, i := range g.Rows {
			req += t.Float(i, "requests")
			drop += t.Float(i, "dropped")
		}
		if req > 0 {
			drops[k] = drop / req
		}
		if c := [2]string{g.Key[0], g.Key[1]}; !slices.Contains(cells, c) {
			cells = append(cells, c)
		}
	}

	var rows [][]string
	var verdicts, prequalNotes []string
	for _, c := range cells {
		row := []string{c[0], c[1]}
		for _, p := range pickers {
			v := mean[key{c[0], c[1], p}][1]
			cellText := experiments.Num(v, 1)
			if d := drops[key{c[0], c[1], p}]; d > 0 {
				cellText += fmt.Sprintf(" (%.1f %% dropped)", 100*d)
			}
			row = append(row, cellText)
		}
		rows = append(rows, row)
		u, _ := strconv.ParseFloat(c[1], 64)
		wr, okWR := mean[key{c[0], c[1], pick.WeightedRandom}]
		if u >= 0.8 && okWR {
			best, bestP := 0.0, ""
			for _, p := range pick.LatencyAware {
				if v, ok := mean[key{c[0], c[1], p}]; ok && (bestP == "" || v[1] < best) {
					best, bestP = v[1], p
				}
			}
			if bestP != "" {
				ratio := best / wr[1]
				// Every picker of a repetition met the same servers and
				// arrivals: the ratio is judged repetition by repetition.
				mark := experiments.Judge(experiments.Ratios(p999[key{c[0], c[1], bestP}], p999[key{c[0], c[1], pick.WeightedRandom}]),
					func(r float64) bool { return r <= 0.5 })
				verdicts = append(verdicts, fmt.Sprintf("n=%s, load %s: %s %s ms against weighted random's %s ms — %.2f×; the 0.5× goal: %s",
					c[0], c[1], bestP, experiments.Num(best, 1), experiments.Num(wr[1], 1), ratio, mark))
			}
		}
		pq, ok1 := mean[key{c[0], c[1], pick.Prequal}]
		ew, ok2 := mean[key{c[0], c[1], pick.P2CPeakEWMA}]
		if ok1 && ok2 && ew[1] > 0 {
			word := "wins"
			if pq[1] > ew[1] {
				word = "**loses**"
			}
			prequalNotes = append(prequalNotes, fmt.Sprintf("n=%s, load %s: prequal %s (p99.9 %s vs %s ms, p99 %s vs %s ms)",
				c[0], c[1], word, experiments.Num(pq[1], 1), experiments.Num(ew[1], 1), experiments.Num(pq[0], 1), experiments.Num(ew[0], 1)))
		}
	}

	var out strings.Builder
	p := in.Meta.Params
	fmt.Fprintf(&out, "Servers draw capacities from {%s}, %s slots and a queue of %s each; mean service %s at capacity 1 (exponential); "+
		"Poisson arrivals for %s of simulated time (the first %s unmeasured); server 0's capacity drops to ×%s at half time. "+
		"Every picker of a cell meets the same servers and arrival seed. Weighted pickers get the nominal capacities as weights.\n\n",
		p["capacities"], p["slots"], p["queue"], p["service"], p["duration"], p["warm-up"], p["noisy-factor"])
	out.WriteString("**p99.9 latency (ms), mean over repetitions**\n\n")
	out.WriteString(experiments.MarkdownTable(append([]string{"n", "load"}, pickers...), rows))
	out.WriteString("\nThe tail above is over served requests: a dropped request has no latency and is left out, so a picker's tail can shrink as it drops more.\n")
	if tail, err := offeredTail(in, cells, pickers); err != nil {
		fmt.Fprintf(&out, "\n(No tail over offered requests: %v.)\n", err)
	} else {
		out.WriteString(tail)
	}
	if len(verdicts) > 0 {
		out.WriteString("\n**Goal — at ≥ 80 % load the best latency-aware picker's p99.9 ≤ 0.5 × weighted random's:**\n\n- " + strings.Join(verdicts, "\n- ") + "\n")
	}
	if len(prequalNotes) > 0 {
		out.WriteString("\n**Prequal against P2C with peak EWMA:**\n\n- " + strings.Join(prequalNotes, "\n- ") + "\n")
	}
	for _, n := range unique(t, "n") {
		var lines experiments.Lines
		for _, g := range t.GroupBy("picker", "n", "utilisation") {
			if g.Key[1] != n {
				continue
			}
			u, _ := strconv.ParseFloat(g.Key[2], 64)
			y, lo, hi := experiments.Summarize(t.Floats(g.Rows, "p999_ms")).MeanSpread()
			lines.Of(g.Key[0]).Point(100*u, y, lo, hi)
		}
		fig, err := in.Figure("p999-n"+n, "p99.9 vs load, n="+n,
			experiments.Line(experiments.Axes{Title: "p99.9 latency, n=" + n, X: "offered load (%)", Y: "p99.9 (ms)", LogY: true}, lines.List))
		if err != nil {
			return "", err
		}
		out.WriteString("\n" + fig + "\n")
	}
	out.WriteString("\nPickers and their sources:\n\n")
	var src [][]string
	for _, p := range pickers {
		src = append(src, []string{p, Sources[p]})
	}
	out.WriteString(experiments.MarkdownTable([]string{"picker", "source"}, src))
	if secs := in.Meta.End.Sub(in.Meta.Start).Seconds(); secs > 0 {
		total := 0.0
		for i := range t.Rows {
			total += t.Float(i, "requests") // drops included
		}
		fmt.Fprintf(&out, "\nSimulated %s measured requests in %.1f s of wall time (%s per second, all cores).\n",
			experiments.Num(total, 0), secs, experiments.Num(total/secs, 0))
	}
	return out.String(), nil
}

// offeredTail is the p99.9 table over every offered request, from
// lb-sim-offered.csv: a drop ranks after every served request, so a cell
// whose drops pass 0.1 % of its requests has no finite p99.9 (∞).
func offeredTail(in *experiments.ReportInput, cells [][2]string, pickers []string) (string, error) {
	t, err := in.ExtraTable("offered")
	if err != nil {
		return "", err
	}
	if err := t.Require("n", "utilisation", "picker", "p999_ms"); err != nil {
		return "", err
	}
	type key struct{ n, util, picker string }
	mean := map[key]float64{}
	for _, g := range t.GroupBy("n", "utilisation", "picker") {
		mean[key{g.Key[0], g.Key[1], g.Key[2]}] = experiments.Summarize(t.Floats(g.Rows, "p999_ms")).Mean
	}
	var rows [][]string
	for _, c := range cells {
		row := []string{c[0], c[1]}
		for _, p := range pickers {
			v, ok := mean[key{c[0], c[1], p}]
			switch {
			case !ok:
				row = append(row, "–")
			case math.IsInf(v, 1):
				row = append(row, "∞")
			default:
				row = append(row, experiments.Num(v, 1))
			}
		}
		rows = append(rows, row)
	}
	return "\n**p99.9 latency over offered requests (ms), mean over repetitions** — the rule: a dropped request ranks after every served one " +
		"(it is never answered), so where drops pass 0.1 % of the requests the p99.9 is ∞ (lb-sim-offered.csv):\n\n" +
		experiments.MarkdownTable(append([]string{"n", "load"}, pickers...), rows), nil
}

func unique(t *experiments.Table, col string) []string {
	var out []string
	for _, g := range t.GroupBy(col) {
		out = append(out, g.Key[0])
	}
	return out
}
