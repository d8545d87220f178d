// Package lbexp holds the load-balancing experiments of seed 004:
// lb-efficiency (the pickers' η with no network) and lb-live (the agent,
// balancer and workers for real).
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

	"github.com/ringside/ringside/balancer/pick"
	"github.com/ringside/ringside/experiments"
)

// Efficiency is lb-efficiency: R picks per repetition for each picker and
// weight set, and η = min(r/w)/max(r/w) (seed 004 §2.4).
type Efficiency struct {
	pickers  experiments.ChoiceList
	sets     weightSets
	requests int
}

// PaperSets are seed 004's two scenarios.
var PaperSets = weightSets{{100, 50, 25, 5}, {100, 95, 90, 85}}

// paperEta is seed 004's η for weighted random on each set (one simulated run each).
var paperEta = map[string]float64{"100/50/25/5": 0.9, "100/95/90/85": 0.985}

func (*Efficiency) Spec() experiments.Spec {
	return experiments.Spec{Name: "lb-efficiency", Backends: []string{"sim"}, Quick: 200, Paper: 1000, Row: efficiencyRow{},
		Summary: "η = min(r/w)/max(r/w) of each picker for seed 004's weight sets {100,50,25,5} and {100,95,90,85} at R = 10⁴, over many seeds"}
}

func (e *Efficiency) Flags(fs *flag.FlagSet) {
	e.pickers = experiments.ChoiceList{Vals: pick.WeightFollowing, Allowed: pick.Algorithms}
	e.sets = PaperSets
	fs.Var(&e.pickers, "pickers", "pickers, comma-separated")
	fs.Var(&e.sets, "weights", "weight sets: numbers separated by / , sets by commas")
	fs.IntVar(&e.requests, "requests", 10_000, "R, requests per repetition")
}

// efficiencyRow is one worker's share in one repetition.
type efficiencyRow struct {
	Picker    string  `csv:"picker"`
	WeightSet string  `csv:"weight_set"`
	Rep       int     `csv:"rep"`
	Seed      uint64  `csv:"seed"`
	Worker    int     `csv:"worker"`
	Weight    float64 `csv:"weight"`
	Requests  int     `csv:"requests"`
	Expected  float64 `csv:"expected"`
}

// Run simulates each repetition on its own seed. Load-aware pickers need
// requests in flight to see: every worker is modelled as a saturated
// server whose capacity is proportional to its weight, draining w_i/Σw of
// a request per arrival, so least-conn and p2c face the same question a
// real balancer does.
func (e *Efficiency) Run(ctx context.Context, env *experiments.Env) error {
	if e.requests < 1 {
		return fmt.Errorf("requests=%d: must be positive", e.requests)
	}
	type cell struct {
		picker string
		set    []float64
	}
	var cells []cell
	for _, p := range e.pickers.Vals {
		for _, s := range e.sets {
			cells = append(cells, cell{p, s})
		}
	}
	return experiments.RunGrid(ctx, env, experiments.Grid{Cells: len(cells), Parallel: experiments.AllCPUs},
		func(_ context.Context, t experiments.Task) ([]efficiencyRow, error) {
			c := cells[t.Cell]
			counts, err := Simulate(c.picker, c.set, e.requests, t.Seed)
			if err != nil {
				return nil, err
			}
			sum := 0.0
			for _, w := range c.set {
				sum += w
			}
			rows := make([]efficiencyRow, len(c.set))
			for i, w := range c.set {
				rows[i] = efficiencyRow{Picker: c.picker, WeightSet: setName(c.set), Rep: t.Rep, Seed: t.Seed, Worker: i,
					Weight: w, Requests: counts[i], Expected: float64(e.requests) * w / sum}
			}
			return rows, nil
		})
}

// Simulate sends requests picks through a picker over weights and returns
// the count per worker (see Run for the load model).
func Simulate(algo string, weights []float64, requests int, seed uint64) ([]int, error) {
	backlog := make([]float64, len(weights))
	loads := pick.NewLoads(len(weights))
	p, err := pick.NewPicker(algo, weights, pick.Inputs{Loads: loads})
	if err != nil {
		return nil, err
	}
	sum := 0.0
	for _, w := range weights {
		sum += w
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	counts := make([]int, len(weights))
	for range requests {
		for i, w := range weights {
			backlog[i] = max(0, backlog[i]-w/sum)
			loads[i].Active.Store(int64(math.Ceil(backlog[i])))
		}
		i := p.Pick(rng.Uint64())
		if i < 0 {
			return nil, fmt.Errorf("picker %s chose nothing for weights %v", algo, weights)
		}
		counts[i]++
		backlog[i]++
	}
	return counts, nil
}

func (e *Efficiency) Report(in *experiments.ReportInput) (string, error) {
	t := in.Table
	var rows [][]string
	var groups []string
	seenSet := map[string]bool{}
	var series experiments.Lines
	// η per repetition, grouped by picker and weight set in CSV order.
	type key struct{ picker, set string }
	var order []key
	etaOf := map[key][]float64{}
	for _, g := range t.GroupBy("picker", "weight_set", "rep") {
		k := key{g.Key[0], g.Key[1]}
		reqs, ws := make([]int, len(g.Rows)), make([]float64, len(g.Rows))
		for j, i := range g.Rows {
			reqs[j], ws[j] = int(t.Float(i, "requests")), t.Float(i, "weight")
		}
		if _, ok := etaOf[k]; !ok {
			order = append(order, k)
		}
		etaOf[k] = append(etaOf[k], Eta(reqs, ws))
	}
	for _, k := range order {
		picker, set, etas := k.picker, k.set, etaOf[k]
		s := experiments.Summarize(etas)
		paper, ref := "–", math.NaN()
		if v, ok := paperEta[set]; ok && picker == pick.WeightedRandom {
			paper, ref = experiments.Num(v, 3)+" (one run)", v
		}
		rows = append(rows, []string{picker, set, strconv.Itoa(s.N), experiments.Num(s.Mean, 4), experiments.Num(s.Std, 4),
			experiments.Num(s.Min, 4), experiments.Num(experiments.Quantile(sortedCopy(etas), 0.05), 4), experiments.Num(s.Max, 4), paper})
		if !seenSet[set] {
			seenSet[set] = true
			groups = append(groups, set)
		}
		b := series.Of(picker)
		y, lo, hi := s.MeanSpread()
		b.Point(0, y, lo, hi)
		b.Ref = append(b.Ref, ref)
	}
	fig, err := in.Figure("eta", "η by picker", experiments.Bar(experiments.Axes{Title: "η by picker (mean ± std over seeds)", Y: "η = min(r/w)/max(r/w)", YMax: 1.05}, groups, series.List))
	if err != nil {
		return "", err
	}
	out := experiments.MarkdownTable([]string{"picker", "weights", "reps", "η mean", "std", "min", "p5", "max", "seed 004"}, rows)
	out += "\n" + fig + "\n\n"
	out += "η = 1 means requests followed the weights exactly. Seed 004 reports η = 0.9 and ≈ 0.985 for weighted random " +
		"from a single simulated run each; the spread over seeds shows how lucky or unlucky one run can be. " +
		"Round robin ignores weights, so its η is min(w)/max(w). Least-conn and p2c see a fluid model of saturated " +
		"workers whose capacity is proportional to their weight.\n"
	return out, nil
}

func sortedCopy(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

// weightSets is a flag: sets separated by commas, weights by slashes.
type weightSets [][]float64

func setName(ws []float64) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = strconv.FormatFloat(w, 'f', -1, 64)
	}
	return strings.Join(parts, "/")
}

func (s *weightSets) String() string {
	parts := make([]string, len(*s))
	for i, ws := range *s {
		parts[i] = setName(ws)
	}
	return strings.Join(parts, ",")
}

func (s *weightSets) Set(v string) error {
	var out weightSets
	for _, set := range strings.Split(v, ",") {
		var ws []float64
		for _, p := range strings.Split(strings.TrimSpace(set), "/") {
			w, err := strconv.ParseFloat(p, 64)
			if err != nil || math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
				return fmt.Errorf("weight %q in set %q: want a finite number ≥ 0", p, set)
			}
			ws = append(ws, w)
		}
		if err := pick.CheckWeights(ws, false); err != nil {
			return fmt.Errorf("set %q: %w", set, err)
		}
		out = append(out, ws)
	}
	*s = out
	return nil
}

// Eta is seed 004's efficiency η = min(r_i/w_i) / max(r_i/w_i) over the
// backends with a positive weight: 1 when requests follow the weights
// exactly. It is NaN when no backend has a positive weight.
func Eta(requests []int, weights []float64) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, w := range weights {
		if w <= 0 {
			continue
		}
		r := float64(requests[i]) / w
		lo, hi = min(lo, r), max(hi, r)
	}
	if math.IsInf(lo, 1) {
		return math.NaN()
	}
	if hi == 0 {
		return 1 // nothing sent anywhere: trivially proportional
	}
	return lo / hi
}
