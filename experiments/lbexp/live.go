package lbexp

import (
	"context"
	crand "crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ringside/ringside/agent"
	"github.com/ringside/ringside/agent/lifecycle"
	"github.com/ringside/ringside/agent/runtime"
	"github.com/ringside/ringside/balancer"
	"github.com/ringside/ringside/balancer/pick"
	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/backend/lbstack"
)

// Live is lb-live: the agent scores real heterogeneous workers and feeds
// the balancer, a built-in load generator drives it at several
// concurrency levels, per picker; beside it the same load goes straight
// to the workers (direct) and through nginx.
type Live struct {
	workers     string
	pickers     experiments.ChoiceList
	clients     experiments.IntList
	baselines   experiments.ChoiceList
	cost        int
	proxyCost   int
	proxyClient int
	duration    time.Duration
	interval    time.Duration
	maxWorkers  int
	tLow, tHigh time.Duration
	low, high   float64
	throttle    float64
	redis       string
	tuning      pick.Tuning
}

// Workloads: cpu burns --cost per request (seed 004's utilisation over
// time); proxy is nearly free per request, so the proxies' own cost shows.
const (
	WorkloadCPU   = "cpu"
	WorkloadProxy = "proxy"
	// WorkloadThrottled is cpu with the first worker throttled to
	// --throttle CPUs halfway through each cell (docker update --cpus): a
	// neighbour taking its machine, which only latency- and load-aware
	// pickers see at once.
	WorkloadThrottled = "cpu-throttled"
	TargetDirect      = "direct"
	TargetNginx       = "nginx"
)

func (*Live) Spec() experiments.Spec {
	return experiments.Spec{Name: "lb-live", Backends: []string{lbstack.Docker, lbstack.Process, lbstack.Kubernetes}, Quick: 2, Paper: 3, Row: liveRow{},
		Summary: "agent + balancer + heterogeneous workers under real HTTP load: throughput, latency p50/p99, request share and utilisation over time per picker, beside direct and nginx"}
}

func (l *Live) Flags(fs *flag.FlagSet) {
	l.pickers = experiments.ChoiceList{Vals: pick.Algorithms, Allowed: pick.Algorithms}
	l.baselines = experiments.ChoiceList{Vals: []string{TargetDirect, TargetNginx}, Allowed: []string{TargetDirect, TargetNginx}}
	fs.StringVar(&l.workers, "workers", "1:default,0.5:default,0.25:default", "workers: CPU limit[:default], comma-separated")
	fs.Var(&l.pickers, "pickers", "pickers, comma-separated")
	fs.Var(&l.clients, "clients", "concurrent clients of the cpu workload, comma-separated (default: 16 quick; 4,16 paper)")
	fs.Var(&l.baselines, "baselines", "direct (the client picks the worker itself: no proxy hop) and/or nginx (Debian's, as a reverse proxy)")
	fs.IntVar(&l.cost, "cost", 20_000, "hash rounds per request of the cpu workload")
	fs.IntVar(&l.proxyCost, "proxy-cost", 50, "hash rounds per request of the proxy workload")
	fs.IntVar(&l.proxyClient, "proxy-clients", 16, "concurrent clients of the proxy workload")
	fs.DurationVar(&l.duration, "duration", 0, "load per cell (default 3s quick, 20s paper)")
	fs.DurationVar(&l.interval, "interval", 500*time.Millisecond, "agent sampling and feed period")
	fs.IntVar(&l.maxWorkers, "max", 5, "most workers the agent may run")
	fs.DurationVar(&l.tLow, "t-low", 5*time.Second, "idle time before the agent sundowns a non-default worker")
	fs.DurationVar(&l.tHigh, "t-high", 3*time.Second, "sustained High before the agent scales up")
	// Load generator and proxy share the cores with the workers, so the
	// pool rarely reaches the agent's production threshold of 75 %.
	fs.Float64Var(&l.low, "low", 20, "utilisation % below which a worker is Low")
	fs.Float64Var(&l.high, "high", 50, "utilisation % above which a worker is High")
	fs.Float64Var(&l.throttle, "throttle", 0.1, "CPUs the first worker drops to halfway through each cpu-throttled cell (0: no such cells)")
	l.tuning.Define(fs, "")
	// gRPC's 10 s blackout outlasts a quick cell (3 s, the throttle at
	// 1.5 s), and every cell starts a fresh balancer: wrr-reports would
	// never leave its blackout and only follow the feed. 1 s measures its
	// steady state, as a long-running balancer is in.
	l.tuning.Blackout = time.Second
	fs.Lookup("blackout").DefValue = "1s"
	fs.StringVar(&l.redis, "redis", os.Getenv("RINGSIDE_REDIS"), "Redis address for the agent's state, as seed 004 keeps it (env RINGSIDE_REDIS, its password env "+RedisPasswordEnv+"; default: a Redis Pod on kubernetes, else in memory)")
}

// liveRow is one request of the load.
type liveRow struct {
	Backend  string        `csv:"backend"`
	Target   string        `csv:"target"`
	Workload string        `csv:"workload"`
	Clients  int           `csv:"clients"`
	Rep      int           `csv:"rep"`
	Client   int           `csv:"client"`
	Seq      int           `csv:"seq"`
	Worker   string        `csv:"worker"`
	Start    time.Duration `csv:"start_ms"`
	Latency  time.Duration `csv:"latency_ms"`
	Status   int           `csv:"status"`
	Seed     uint64        `csv:"seed"`
}

// The run's extra CSVs beside lb-live.csv (Env.CSV): the agent's view of
// every worker at every step, and its lifecycle events.
const (
	samplesCSV  = "samples"
	eventsCSV   = "events"
	SamplesFile = "lb-live-" + samplesCSV + ".csv"
	EventsFile  = "lb-live-" + eventsCSV + ".csv"
)

// sampleRow is the agent's view of one worker at one step, labelled with
// the cell that was running; eventRow one lifecycle event.
type sampleRow struct {
	T        time.Duration `csv:"t_ms"`
	Target   string        `csv:"target"`
	Workload string        `csv:"workload"`
	Clients  int           `csv:"clients"`
	Worker   string        `csv:"worker"`
	CPULimit float64       `csv:"cpu_limit"`
	CPU      float64       `csv:"cpu_pct"`
	Mem      float64       `csv:"mem_pct"`
	Score    float64       `csv:"score"`
	Avail    float64       `csv:"avail"`
	State    string        `csv:"state"`
	Weight   float64       `csv:"weight"`
	Active   int64         `csv:"active"`
	Seed     uint64        `csv:"seed"`
}

type eventRow struct {
	T      time.Duration `csv:"t_ms"`
	Kind   string        `csv:"kind"`
	Worker string        `csv:"worker"`
	Detail string        `csv:"detail"`
	Seed   uint64        `csv:"seed"`
}

// phase labels samples with the cell that was running.
type phase struct {
	mu               sync.Mutex
	target, workload string
	clients          int
	seed             uint64
	t0               time.Time
	samples          []sampleRow
	events           []eventRow
	lastEvent        uint64 // Seq of the last event recorded
}

func (p *phase) set(target, workload string, clients int, seed uint64) {
	p.mu.Lock()
	p.target, p.workload, p.clients, p.seed = target, workload, clients, seed
	p.mu.Unlock()
}

func (p *phase) record(v agent.View) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := v.At.Sub(p.t0)
	for _, w := range v.Workers {
		p.samples = append(p.samples, sampleRow{T: t, Target: p.target, Workload: p.workload, Clients: p.clients, Worker: w.Name,
			CPULimit: w.CPULimit, CPU: w.CPU, Mem: w.Mem, Score: w.Score, Avail: w.Avail, State: w.State, Weight: w.Weight,
			Active: w.Active, Seed: p.seed})
	}
	for _, e := range v.Events {
		// Events of one agent step share a timestamp: their numbers tell them apart.
		if e.Seq <= p.lastEvent {
			continue
		}
		p.events = append(p.events, eventRow{T: e.At.Sub(p.t0), Kind: e.Kind, Worker: e.Worker, Detail: e.Detail, Seed: p.seed})
		p.lastEvent = e.Seq
	}
}

func (l *Live) Run(ctx context.Context, env *experiments.Env) error {
	specs, err := runtime.ParseSpecs(l.workers)
	if err != nil {
		return fmt.Errorf("--workers: %w", err)
	}
	d := l.duration
	if d == 0 {
		d = 3 * time.Second
		if env.Profile == experiments.ProfilePaper {
			d = 20 * time.Second
		}
	}
	if d < 500*time.Millisecond || l.cost < 0 || l.proxyCost < 0 || l.proxyClient < 1 {
		return fmt.Errorf("want --duration ≥ 500ms, --cost and --proxy-cost ≥ 0, --proxy-clients ≥ 1")
	}
	rt, backend, cleanup, err := lbstack.Workers(ctx, env.Backend, env.Log)
	if err != nil {
		return err
	}
	defer cleanup()
	env.Backend = backend // Docker may have fallen back to processes
	for i, sp := range specs {
		sp.Name = fmt.Sprintf("w%d-%gcpu", i+1, sp.CPULimit)
		if _, err := rt.Start(ctx, sp); err != nil {
			return err
		}
	}
	// The feed's token is random: on Kubernetes, other Pods could reach
	// the agent and guess one made of the seed.
	token := crand.Text()
	pods, _ := rt.(podServices)
	store, closeStore, err := l.store(ctx, pods, env.Log)
	if err != nil {
		return err
	}
	defer closeStore()
	a, err := agent.New(agent.Config{
		Store:   store,
		Runtime: rt, Spawn: runtime.Spec{CPULimit: 0.5}, Interval: l.interval, Token: token,
		Pool: lifecycle.Config{Min: len(specs), Max: max(l.maxWorkers, len(specs)), SundownAfter: l.tLow, ScaleUpAfter: l.tHigh, Low: l.low, High: l.high},
		Log:  slog.New(warnOnly{env.Log.Handler()}).With("component", "agent"),
	})
	if err != nil {
		return err
	}
	agentSrv, agentURL, err := serveAgent(a.Handler(prometheus.NewRegistry()), pods)
	if err != nil {
		return err
	}
	defer agentSrv.Close()
	actx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	ph := &phase{t0: time.Now()}
	stepping := make(chan struct{})
	go func() {
		defer close(stepping)
		t := time.NewTicker(l.interval)
		defer t.Stop()
		for {
			if err := a.Step(actx); err != nil && actx.Err() == nil {
				env.Log.Warn("agent step", "err", err)
			}
			ph.record(a.View())
			select {
			case <-actx.Done():
				return
			case <-t.C:
			}
		}
	}()
	feed := "ws" + agentURL[len("http"):] + "/feed"
	for deadline := time.Now().Add(15 * time.Second); len(a.View().Workers) < len(specs); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent saw %d of %d workers after 15 s", len(a.View().Workers), len(specs))
		}
	}

	type cell struct {
		target, workload string
		clients, cost    int
	}
	clients := experiments.Points(l.clients, env.Profile, experiments.IntList{16}, experiments.IntList{4, 16})
	var cells []cell
	for _, p := range l.pickers.Vals {
		for _, c := range clients {
			cells = append(cells, cell{p, WorkloadCPU, c, l.cost})
		}
	}
	if l.throttle > 0 {
		for _, p := range append(slices.Clone(l.pickers.Vals), l.baselines.Vals...) {
			if p == TargetNginx && lbstack.NginxBinary() == "" {
				continue
			}
			for _, c := range clients {
				cells = append(cells, cell{p, WorkloadThrottled, c, l.cost})
			}
		}
	}
	proxyTargets := []string{pick.WeightedRandom}
	for _, b := range l.baselines.Vals {
		if b == TargetNginx && lbstack.NginxBinary() == "" {
			env.Log.Warn("nginx is not installed; lb-live runs without its nginx baseline (apt-get install nginx)")
			continue
		}
		proxyTargets = append(proxyTargets, b)
	}
	for _, t := range proxyTargets {
		cells = append(cells, cell{t, WorkloadProxy, l.proxyClient, l.proxyCost})
	}
	err = experiments.RunGrid(ctx, env, experiments.Grid{Cells: len(cells), Interleave: true}, func(ctx context.Context, t experiments.Task) ([]liveRow, error) {
		c := cells[t.Cell]
		ph.set(c.target, c.workload, c.clients, t.Seed)
		var during func(context.Context) func()
		if c.workload == WorkloadThrottled {
			during = l.throttler(rt, a, specs[0].CPULimit, d/2, env.Log)
		}
		shots, err := l.cell(ctx, env, a, pods, feed, token, c.target, c.clients, c.cost, d, during)
		if err != nil {
			return nil, fmt.Errorf("%s %s clients=%d: %w", c.workload, c.target, c.clients, err)
		}
		rows := make([]liveRow, len(shots))
		for i, s := range shots {
			rows[i] = liveRow{Backend: backend, Target: c.target, Workload: c.workload, Clients: c.clients, Rep: t.Rep,
				Client: s.client, Seq: s.seq, Worker: s.worker, Start: s.start, Latency: s.lat, Status: s.status, Seed: t.Seed}
		}
		return rows, nil
	})
	if err != nil {
		return err
	}
	stopAgent()
	<-stepping // the sampler is done with ph
	ph.record(a.View())
	if err := emitAll(env, samplesCSV, ph.samples); err != nil {
		return err
	}
	return emitAll(env, eventsCSV, ph.events)
}

// emitAll writes rows to the run's extra CSV of that suffix.
func emitAll[R any](env *experiments.Env, suffix string, rows []R) error {
	var zero R
	sink, err := env.CSV(suffix, zero)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := sink.Write(r); err != nil {
			return fmt.Errorf("%s csv: %w", suffix, err)
		}
	}
	return nil
}

// cpuSetter is a runtime that can change a running worker's CPU limit.
type cpuSetter interface {
	SetCPULimit(ctx context.Context, id string, cpus float64) error
}

// throttler returns what a cpu-throttled cell runs beside its load: the
// first worker drops to --throttle CPUs after, and gets its own limit
// back when the returned stop is called.
func (l *Live) throttler(rt lbstack.Runtime, a *agent.Agent, own float64, after time.Duration, log *slog.Logger) func(context.Context) func() {
	return func(ctx context.Context) func() {
		set, ok := rt.(cpuSetter)
		id := ""
		for _, w := range a.View().Workers {
			if strings.HasPrefix(w.Name, "w1-") {
				id = w.ID
			}
		}
		if !ok || id == "" {
			log.Warn("cannot throttle the first worker", "runtime_can", ok, "worker_id", id)
			return func() {}
		}
		t := time.AfterFunc(after, func() {
			if err := set.SetCPULimit(ctx, id, l.throttle); err != nil {
				log.Warn("throttling the first worker", "err", err)
			}
		})
		return func() {
			t.Stop()
			if err := set.SetCPULimit(context.WithoutCancel(ctx), id, own); err != nil {
				log.Warn("restoring the first worker", "err", err)
			}
		}
	}
}

// cell runs one load level against one target and returns its requests;
// during, if set, starts alongside the load and its result runs after.
func (l *Live) cell(ctx context.Context, env *experiments.Env, a *agent.Agent, pods podServices, feed, token, target string, clients, cost int, d time.Duration,
	during func(context.Context) func()) ([]shot, error) {
	load := func(urlFor func(client, seq int) string) []shot {
		if during != nil {
			defer during(ctx)()
		}
		return generate(ctx, clients, d, urlFor)
	}
	path := "/work?cost=" + strconv.Itoa(cost)
	var workers []string
	var weights []float64
	for _, w := range a.View().Workers {
		if w.Weight > 0 {
			workers, weights = append(workers, w.Addr), append(weights, w.Weight)
		}
	}
	if len(workers) == 0 {
		return nil, errors.New("the agent knows no serving worker")
	}
	switch target {
	case TargetDirect:
		// The same weighted-random choice made in the client: the only
		// difference from the balancer is the proxy hop.
		p, err := pick.NewPicker(pick.WeightedRandom, weights, pick.Inputs{})
		if err != nil {
			return nil, err
		}
		return load(func(int, int) string {
			return "http://" + workers[p.Pick(rand.Uint64())] + path
		}), nil
	case TargetNginx:
		n, err := lbstack.StartNginx(ctx, filepath.Join(env.Dir, ".nginx"), workers, weights)
		if err != nil {
			return nil, err
		}
		defer n.Shutdown()
		defer os.RemoveAll(filepath.Join(env.Dir, ".nginx"))
		return load(func(int, int) string { return "http://" + n.Addr + path }), nil
	}
	if pods != nil {
		url, stop, err := pods.Balancer(ctx, target, feed, token, l.tuningArgs())
		if err != nil {
			return nil, err
		}
		defer stop()
		env.Log.Info("the balancer runs as a Pod of its own Deployment", "picker", target, "url", url)
		return load(func(int, int) string { return url + path }), nil
	}
	b, err := balancer.New(balancer.Options{Algorithm: target, Tuning: l.tuning, Log: slog.New(warnOnly{env.Log.Handler()}).With("component", "balancer")})
	if err != nil {
		return nil, err
	}
	bctx, stop := context.WithCancel(ctx)
	defer stop()
	go b.Follow(bctx, balancer.FeedOptions{URL: feed, Token: token, Name: "lb-live", TallyEvery: l.interval,
		AllowLoopback: true}) // the workers are this host's: processes on loopback, or containers
	// The balancer's network front, as cmd/balancer serves it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	front := &balancer.Front{B: b}
	go front.Serve(ln)
	defer front.Shutdown(context.WithoutCancel(ctx))
	url := "http://" + ln.Addr().String()
	deadline := time.Now().Add(10 * time.Second)
	for len(b.Workers()) == 0 {
		if time.Now().After(deadline) {
			return nil, errors.New("the balancer got no weights from the agent within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return load(func(int, int) string { return url + path }), nil
}

// tuningArgs are the pickers' parameters as cmd/balancer's flags.
func (l *Live) tuningArgs() []string {
	fs := flag.NewFlagSet("tuning", flag.ContinueOnError)
	var t pick.Tuning
	t.Define(fs, "") // the flags point into t, set to the defaults…
	t = l.tuning     // …and now read lb-live's values
	var args []string
	fs.VisitAll(func(f *flag.Flag) { args = append(args, "--"+f.Name+"="+f.Value.String()) })
	return args
}

// warnOnly passes on warnings and errors only: the agent and balancer log
// every connection at info, which would drown the progress lines.
type warnOnly struct{ slog.Handler }

func (h warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}
func (h warnOnly) WithAttrs(as []slog.Attr) slog.Handler { return warnOnly{h.Handler.WithAttrs(as)} }
func (h warnOnly) WithGroup(n string) slog.Handler       { return warnOnly{h.Handler.WithGroup(n)} }
