package lbexp

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ringside/ringside/agent/runtime"
	"github.com/ringside/ringside/balancer/pick"
	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/backend/lbstack"
	"github.com/ringside/ringside/internal/imagebuild"
)

// Proxy is lb-proxy: the balancer's own cost against nginx's. Both run as
// processes on this machine in front of the same workers, and one external
// load generator (wrk from Debian) drives each in turn with near-free
// requests, in one run, alternating which goes first.
type Proxy struct {
	workers, conns, threads, cost int
	duration                      time.Duration
	picker                        string
	profile, control              bool
	fronts                        experiments.ChoiceList
}

const (
	TargetBalancer = "balancer"
	// TargetControl is a second nginx, configured as the first: its ratio
	// to the first is what two identical proxies measure here, the floor
	// under any reading of the balancer's.
	TargetControl = "nginx-control"
	proxyProfile  = "lb-proxy-balancer.pprof"
)

// The balancer's fronts (cmd/balancer --front); the first is its default.
var Fronts = []string{"epoll", "fasthttp", "conn", "net/http"}

// frontBefore is the front the balancer had when #29 asked for a faster
// one (balancer.Front): the measured front's p99 is held to no worse than
// its, in the same repetition.
const frontBefore = "conn"

func (*Proxy) Spec() experiments.Spec {
	return experiments.Spec{Name: "lb-proxy", Backends: []string{lbstack.Process}, Quick: 3, Paper: 10, Row: proxyRow{},
		Summary: "requests per second and latency of the balancer and of nginx in front of the same workers, driven by wrk with near-free requests, beside the goal of ≥ 0.9 × nginx"}
}

func (p *Proxy) Flags(fs *flag.FlagSet) {
	fs.IntVar(&p.workers, "workers", 2, "worker processes behind both proxies")
	fs.IntVar(&p.conns, "connections", 16, "wrk connections")
	fs.IntVar(&p.threads, "threads", 2, "wrk threads")
	fs.IntVar(&p.cost, "cost", 0, "hash rounds per request (0: near-free, the proxies' cost shows)")
	fs.DurationVar(&p.duration, "duration", 3*time.Second, "wrk run per target and repetition")
	fs.StringVar(&p.picker, "picker", pick.WeightedRandom, "the balancer's picker")
	fs.BoolVar(&p.control, "control", true, "measure a second nginx as one more target: its ratio to the first is the spread two identical proxies show on this machine")
	fs.BoolVar(&p.profile, "profile-balancer", true, "keep a CPU profile of the balancer's first run (its first front) beside the CSV ("+proxyProfile+")")
	p.fronts = experiments.ChoiceList{Vals: Fronts[:3], Allowed: Fronts}
	fs.Var(&p.fronts, "fronts", "the balancer's fronts to measure, each as its own process in the same run: "+strings.Join(Fronts, ", ")+" (docs/balancer-front.md)")
}

// proxyRow is one wrk run against one target.
type proxyRow struct {
	Target      string        `csv:"target"`
	Front       string        `csv:"front"` // the balancer's; empty for nginx
	Rep         int           `csv:"rep"`
	Connections int           `csv:"connections"`
	Requests    int           `csv:"requests"`
	RPS         float64       `csv:"requests_per_s"`
	P50         time.Duration `csv:"p50_ms"`
	P99         time.Duration `csv:"p99_ms"`
	Errors      int           `csv:"errors"`
	// The target's processor time (user and system, nginx's workers
	// included) over the wrk run, per request served: what a request
	// costs the proxy, which the neighbours' scheduling moves far less
	// than its throughput. NaN where it could not be read.
	CPUPerRequest float64 `csv:"cpu_us_per_request"`
	Seed          uint64  `csv:"seed"`
}

func (p *Proxy) Run(ctx context.Context, env *experiments.Env) error {
	if p.workers < 1 || p.conns < 1 || p.threads < 1 || p.threads > p.conns || p.duration < time.Second {
		return fmt.Errorf("want workers, connections ≥ 1, 1 ≤ threads ≤ connections, duration ≥ 1s")
	}
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		return fmt.Errorf("%w: wrk not found (apt-get install wrk): lb-proxy needs an external load generator", experiments.ErrUnavailable)
	}
	if lbstack.NginxBinary() == "" {
		return fmt.Errorf("%w: nginx not found (apt-get install nginx): lb-proxy measures the balancer against it", experiments.ErrUnavailable)
	}
	workerBin, err := imagebuild.Static(ctx, "github.com/ringside/ringside/cmd/worker")
	if err != nil {
		return err
	}
	balancerBin, err := imagebuild.Static(ctx, "github.com/ringside/ringside/cmd/balancer")
	if err != nil {
		return err
	}
	rt := runtime.NewProcess(workerBin)
	defer rt.RemoveAll(context.Background())
	var addrs []string
	var weights []float64
	for i := range p.workers {
		w, err := rt.Start(ctx, runtime.Spec{Name: fmt.Sprintf("w%d", i+1)})
		if err != nil {
			return err
		}
		addrs, weights = append(addrs, w.Addr), append(weights, 1)
	}
	balancers := map[string]*lbstack.Balancer{}
	for _, front := range p.fronts.Vals {
		b, err := lbstack.StartBalancer(ctx, balancerBin, p.picker, addrs, "--front", front)
		if err != nil {
			return fmt.Errorf("balancer with front %s: %w", front, err)
		}
		defer b.Stop(os.Interrupt, 3*time.Second)
		balancers[front] = b
	}
	dir := filepath.Join(env.Dir, ".nginx-proxy")
	defer os.RemoveAll(dir)
	n, err := lbstack.StartNginx(ctx, dir, addrs, weights)
	if err != nil {
		return err
	}
	defer n.Shutdown()
	var control *lbstack.Nginx
	if p.control {
		cdir := filepath.Join(env.Dir, ".nginx-control")
		defer os.RemoveAll(cdir)
		if control, err = lbstack.StartNginx(ctx, cdir, addrs, weights); err != nil {
			return fmt.Errorf("the control nginx: %w", err)
		}
		defer control.Shutdown()
	}

	// Each repetition drives every target in turn; the order rotates, so
	// none always meets the machine as another left it.
	type target struct {
		name, front, addr string
		cpu               func() (time.Duration, error)
	}
	var targets []target
	for _, front := range p.fronts.Vals {
		targets = append(targets, target{TargetBalancer, front, balancers[front].Addr, balancers[front].CPU})
	}
	targets = append(targets, target{TargetNginx, "", n.Addr, n.CPU})
	if control != nil {
		targets = append(targets, target{TargetControl, "", control.Addr, control.CPU})
	}
	path := "/work?cost=" + strconv.Itoa(p.cost)
	return experiments.RunGrid(ctx, env, experiments.Grid{Cells: 1}, func(ctx context.Context, t experiments.Task) ([]proxyRow, error) {
		var rows []proxyRow
		for k := range targets {
			tg := targets[(k+t.Rep)%len(targets)]
			var profiled chan error
			if p.profile && t.Rep == 0 && tg.front == p.fronts.Vals[0] {
				profiled = make(chan error, 1)
				go func() {
					profiled <- balancers[tg.front].Profile(ctx, p.duration-500*time.Millisecond, filepath.Join(env.Dir, proxyProfile))
				}()
			}
			label := strings.TrimSpace(tg.name + " " + tg.front)
			cpu0, cpuErr := tg.cpu()
			out, err := lbstack.Wrk(ctx, wrk, "-t", strconv.Itoa(p.threads), "-c", strconv.Itoa(p.conns), "-d", p.duration.String(), "--latency", "http://"+tg.addr+path)
			if err != nil {
				return nil, fmt.Errorf("wrk against %s: %w", label, err)
			}
			r, err := lbstack.ParseWrk(out)
			if err != nil {
				return nil, fmt.Errorf("wrk against %s: %w", label, err)
			}
			if profiled != nil {
				if err := <-profiled; err != nil {
					env.Log.Warn("profiling the balancer", "err", err)
				}
			}
			perRequest := math.NaN()
			cpu1, err := tg.cpu()
			if err = errors.Join(cpuErr, err); err != nil {
				env.Log.Warn("reading the proxy's processor time", "target", label, "err", err)
			} else if r.Requests > 0 {
				perRequest = float64((cpu1 - cpu0).Microseconds()) / float64(r.Requests)
			}
			rows = append(rows, proxyRow{Target: tg.name, Front: tg.front, Rep: t.Rep, Connections: p.conns, Requests: r.Requests, RPS: r.RPS,
				P50: r.P50, P99: r.P99, Errors: r.Errors, CPUPerRequest: perRequest, Seed: t.Seed})
		}
		return rows, nil
	})
}

// atLeastNine is lb-proxy's goal for one repetition's ratio to nginx.
func atLeastNine(r float64) bool { return r >= 0.9 }

// atMostOne is its goal for one repetition's p99 against frontBefore's.
func atMostOne(r float64) bool { return r <= 1 }

// medianOf says "median over N runs (min–max)" of per-repetition ratios.
func medianOf(ratios []float64) string {
	s := experiments.Summarize(ratios)
	return fmt.Sprintf("%s median over %d runs (%s–%s)", experiments.Num(s.P50, 2), s.N, experiments.Num(s.Min, 2), experiments.Num(s.Max, 2))
}

func (p *Proxy) Report(in *experiments.ReportInput) (string, error) {
	t := in.Table
	if err := t.Require("target", "front", "rep", "requests_per_s"); err != nil {
		return "", err
	}
	label := func(i int) string { return strings.TrimSpace(t.Str(i, "target") + " " + t.Str(i, "front")) }
	// Each front's requests per second over nginx's in the same repetition.
	// And its processor time per request over nginx's (CSVs from before
	// the column have none).
	hasCPU := t.Has("cpu_us_per_request")
	ratios, cpuRatios := map[string][]float64{}, map[string][]float64{}
	var fronts []string
	var control []float64               // the control nginx over nginx, per repetition
	p99Ratios := map[string][]float64{} // each front's p99 over frontBefore's, per repetition
	for _, g := range t.GroupBy("rep") {
		nginx, nginxCPU, p99Before := 0.0, math.NaN(), math.NaN()
		for _, i := range g.Rows {
			if t.Str(i, "target") == TargetBalancer && t.Str(i, "front") == frontBefore {
				p99Before = t.Float(i, "p99_ms")
			}
			if t.Str(i, "target") == TargetNginx {
				nginx = t.Float(i, "requests_per_s")
				if hasCPU {
					nginxCPU = t.Float(i, "cpu_us_per_request")
				}
			}
		}
		for _, i := range g.Rows {
			if t.Str(i, "target") == TargetControl && nginx > 0 {
				control = append(control, t.Float(i, "requests_per_s")/nginx)
			}
			if f := t.Str(i, "front"); t.Str(i, "target") == TargetBalancer && nginx > 0 {
				if _, seen := ratios[f]; !seen {
					fronts = append(fronts, f)
				}
				ratios[f] = append(ratios[f], t.Float(i, "requests_per_s")/nginx)
				if f != frontBefore && p99Before > 0 {
					p99Ratios[f] = append(p99Ratios[f], t.Float(i, "p99_ms")/p99Before)
				}
				if hasCPU && nginxCPU > 0 {
					if r := t.Float(i, "cpu_us_per_request") / nginxCPU; !math.IsNaN(r) {
						cpuRatios[f] = append(cpuRatios[f], r)
					}
				}
			}
		}
	}
	var rows [][]string
	for _, g := range t.GroupBy("target", "front") {
		r := experiments.Summarize(t.Floats(g.Rows, "requests_per_s"))
		p50 := experiments.Summarize(t.Floats(g.Rows, "p50_ms"))
		p99 := experiments.Summarize(t.Floats(g.Rows, "p99_ms"))
		errs := 0.0
		for _, v := range t.Floats(g.Rows, "errors") {
			errs += v
		}
		row := []string{label(g.Rows[0]), strconv.Itoa(r.N), experiments.Num(r.P50, 0), experiments.Num(r.Min, 0), experiments.Num(r.Max, 0),
			experiments.Num(p50.P50, 3), experiments.Num(p99.P50, 3), experiments.Num(errs, 0)}
		if hasCPU {
			row = append(row, experiments.Num(experiments.Summarize(t.Floats(g.Rows, "cpu_us_per_request")).P50, 1))
		}
		rows = append(rows, row)
	}
	header := []string{"target", "runs", "req/s median", "min", "max", "p50 ms (median)", "p99 ms (median)", "errors"}
	if hasCPU {
		header = append(header, "CPU µs / request (median)")
	}
	pm := in.Meta.Params
	out := fmt.Sprintf("wrk -t%s -c%s -d%s against each proxy in turn (the order rotating each repetition), %s worker processes behind all, /work?cost=%s; "+
		"the balancer (cmd/balancer, picker %s, one process per front) and nginx (worker_processes auto, upstream keep-alive, setting the X-Forwarded-For, -Host and -Proto headers the balancer sets) are all processes on this machine.\n\n",
		pm["threads"], pm["connections"], pm["duration"], pm["workers"], pm["cost"], pm["picker"])
	out += experiments.MarkdownTable(header, rows)
	out += "\n"
	for k, f := range fronts {
		line := fmt.Sprintf("Balancer (%s front) / nginx requests per second: %s", f, medianOf(ratios[f]))
		if k == 0 {
			line = "**" + line + "** — the goal of ≥ 0.9: " + experiments.Judge(ratios[f], atLeastNine)
		}
		out += "- " + line + ".\n"
		if k == 0 && len(p99Ratios[f]) > 0 {
			out += fmt.Sprintf("- Balancer (%s front) / (%s front) p99 latency: %s — the goal of a p99 no worse than the %s front's (the front #29 started from): %s.\n",
				f, frontBefore, medianOf(p99Ratios[f]), frontBefore, experiments.Judge(p99Ratios[f], atMostOne))
		}
		if len(cpuRatios[f]) > 0 {
			out += fmt.Sprintf("- Balancer (%s front) / nginx processor time per request: %s.\n", f, medianOf(cpuRatios[f]))
		}
	}
	if len(control) > 0 {
		out += fmt.Sprintf("- Control: a second nginx, configured as the first, / nginx requests per second: %s; the goal of ≥ 0.9 held to it: %s — "+
			"what two identical proxies measure against each other on this machine, the floor under the balancer's reading.\n",
			medianOf(control), experiments.Judge(control, atLeastNine))
	}
	if _, err := os.Stat(filepath.Join(in.Dir, proxyProfile)); err == nil {
		out += "\nWhere the balancer's time goes: `go tool pprof -top " + proxyProfile + "` (a CPU profile of its first front's first run, beside this report).\n"
	}
	return out, nil
}
