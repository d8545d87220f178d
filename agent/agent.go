// Package agent is seed 004's deployment agent: it discovers worker
// instances through a runtime, scores them (package score), drives their
// lifecycle (package lifecycle), starts and stops workers, keeps its state
// in a store (Redis), and feeds the ordered queue of weights to balancers
// over a websocket; a dashboard shows it all live.
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/ringside/ringside/agent/lifecycle"
	"github.com/ringside/ringside/agent/runtime"
	"github.com/ringside/ringside/agent/score"
	"github.com/ringside/ringside/internal/weightfeed"
)

// Runtime is what the agent needs of a place that runs workers.
type Runtime interface {
	List(ctx context.Context) ([]runtime.Instance, error)
	Sample(ctx context.Context, inst runtime.Instance) (score.Sample, error)
	Start(ctx context.Context, sp runtime.Spec) (runtime.Instance, error)
	Stop(ctx context.Context, id string) error
}

// Config configures an Agent.
type Config struct {
	Runtime  Runtime
	Store    Store // nil: state is not persisted
	Pool     lifecycle.Config
	Weights  score.Weights // zero: score.DefaultWeights
	Spawn    runtime.Spec  // what a scale-up starts
	Interval time.Duration // default 1 s: sampling, lifecycle step and feed push
	// ProbeTimeout bounds the /healthz probe whose time feeds the
	// availability score; a failed probe counts as this long.
	ProbeTimeout time.Duration
	Token        string   // weight feed token
	Origins      []string // extra allowed Origins of the feed
	Log          *slog.Logger
	// Clock is the time of every decision — lifecycle steps, tally
	// ages, events, probe times — and of Run's ticks (nil: the real one).
	Clock clock.WithTicker
}

// Event is something the agent did or saw, for the dashboard and
// experiments.
type Event struct {
	Seq    uint64    `json:"seq"` // numbers events from 1, so a reader of View can take only new ones
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"`             // scale-up, refill, sundown, revive, shutdown, lost, start-failed
	Worker string    `json:"worker,omitempty"` // name
	ID     string    `json:"id,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

// Agent runs the control loop.
type Agent struct {
	cfg    Config
	pool   *lifecycle.Pool
	feed   *Feed
	client *http.Client

	mu       sync.Mutex
	prev     map[string]score.Sample
	avail    map[string]*score.Availability
	tallies  map[string]timedTally // by balancer
	lastReqs map[string]uint64     // requests per worker at the previous step
	view     View
	hist     history
	events   []Event
	eventSeq uint64
	seq      uint64
	restored map[string]WorkerState
	names    map[string]string // worker ID → name, for events
}

type timedTally struct {
	at time.Time
	r  weightfeed.Tally
}

// View is what the dashboard shows.
type View struct {
	At        time.Time     `json:"at"`
	Workers   []WorkerState `json:"workers"`
	Shares    []float64     `json:"shares"` // request share per worker over the last step
	Desired   int           `json:"desired"`
	Balancers int           `json:"balancers"`
	Events    []Event       `json:"events"`
	Seq       uint64        `json:"seq"`
}

// New validates cfg and returns an agent; Resume or Run start it.
func New(cfg Config) (*Agent, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("agent: no runtime")
	}
	if cfg.Weights == (score.Weights{}) {
		cfg.Weights = score.DefaultWeights
	}
	if err := cfg.Weights.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	pool, err := lifecycle.NewPool(cfg.Pool)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a := &Agent{
		cfg: cfg, pool: pool, client: &http.Client{Timeout: cfg.ProbeTimeout},
		prev: map[string]score.Sample{}, avail: map[string]*score.Availability{},
		tallies: map[string]timedTally{}, lastReqs: map[string]uint64{}, names: map[string]string{},
	}
	a.feed = NewFeed(cfg.Token, cfg.Origins, a.tallied, cfg.Log)
	return a, nil
}

// Feed is the weight feed's websocket handler.
func (a *Agent) Feed() *Feed { return a.feed }

// MaxBalancers bounds the balancers whose tallies the agent keeps at once:
// a tally is at most 1 MiB (the feed's read limit), so this bounds their
// memory too, whatever names a peer with the token makes up.
const MaxBalancers = 256

func (a *Agent) tallied(r weightfeed.Tally) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, known := a.tallies[r.Balancer]; !known && len(a.tallies) >= MaxBalancers {
		return fmt.Errorf("balancer %q: the agent already keeps the tallies of %d balancers", r.Balancer, MaxBalancers)
	}
	a.tallies[r.Balancer] = timedTally{at: a.cfg.Clock.Now(), r: r}
	return nil
}

// Resume loads the stored state, so lifecycle records (and the time a
// worker has already spent idle) survive an agent restart.
func (a *Agent) Resume(ctx context.Context) error {
	if a.cfg.Store == nil {
		return nil
	}
	snap, ok, err := a.cfg.Store.Load(ctx)
	if err != nil || !ok {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.restored = map[string]WorkerState{}
	var recs []lifecycle.Worker
	for _, w := range snap.Workers {
		a.restored[w.ID] = w
		recs = append(recs, lifecycle.Worker{ID: w.ID, Default: w.Default, State: lifecycle.State(w.State), Since: time.UnixMilli(w.Since)})
		av := score.NewAvailability(20, 3)
		for _, ms := range w.Times {
			av.Observe(time.Duration(ms * float64(time.Millisecond)))
		}
		a.avail[w.ID] = av
	}
	a.pool.Restore(recs)
	a.cfg.Log.Info("agent resumed from store", "workers", len(recs), "desired", snap.Desired)
	return nil
}

// Run steps every interval until ctx ends. A failed step is logged and
// the next one tries again; the last published queue stays in force.
func (a *Agent) Run(ctx context.Context) error {
	t := a.cfg.Clock.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		if err := a.Step(ctx); err != nil && ctx.Err() == nil {
			a.cfg.Log.Warn("agent step failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

type reading struct {
	inst  runtime.Instance
	s     score.Sample
	err   error
	probe time.Duration
}

// Step is one round: observe, decide, act, publish, persist.
func (a *Agent) Step(ctx context.Context) error {
	insts, err := a.cfg.Runtime.List(ctx)
	if err != nil {
		return err
	}
	now := a.cfg.Clock.Now()
	reads := a.observe(ctx, insts)

	a.mu.Lock()
	live := map[string]bool{}
	for _, in := range insts {
		live[in.ID] = true
		a.names[in.ID] = in.Name
		a.pool.Add(in.ID, in.Default, now)
	}
	for _, w := range a.pool.Workers() {
		if !live[w.ID] {
			a.pool.Remove(w.ID)
			delete(a.prev, w.ID)
			delete(a.avail, w.ID)
			a.eventLocked(now, "lost", w.ID, "no longer running")
			delete(a.names, w.ID)
		}
	}
	active, requests := a.balancerCountsLocked(now)
	states := make([]WorkerState, 0, len(reads))
	var obs []lifecycle.Observation
	for _, rd := range reads {
		ws := a.scoreLocked(rd)
		ws.Active, ws.Requests = active[rd.inst.ID], requests[rd.inst.ID]
		states = append(states, ws)
		if rd.err == nil {
			obs = append(obs, lifecycle.Observation{ID: rd.inst.ID, Utilisation: 100 - ws.Score, Active: ws.Active})
		}
	}
	acts := a.pool.Step(now, obs)
	a.mu.Unlock()

	gone := a.act(ctx, now, acts)

	a.mu.Lock()
	defer a.mu.Unlock()
	states = slices.DeleteFunc(states, func(w WorkerState) bool { return gone[w.ID] })
	for i := range states {
		w, _ := a.pool.Get(states[i].ID)
		states[i].State, states[i].Since = string(w.State), w.Since.UnixMilli()
		states[i].Weight = weight(states[i])
	}
	sortWorkers(states)
	a.seq++
	msg := queue(a.seq, states, a.pool.Config())
	if msg.Validate() == nil {
		a.feed.Publish(msg)
	} else if len(states) > 0 {
		a.cfg.Log.Warn("no worker can take load; the balancers keep their last queue")
	}
	a.view = View{At: now, Workers: states, Shares: a.sharesLocked(states), Desired: a.pool.Serving(),
		Balancers: a.feed.Clients(), Events: slices.Clone(a.events), Seq: a.seq}
	a.hist.add(now, states, a.view.Shares)
	if a.cfg.Store != nil {
		if err := a.cfg.Store.Save(ctx, Snapshot{Desired: a.pool.Serving(), Workers: states}); err != nil {
			// Redis down: keep running on memory, persist again next step.
			return err
		}
	}
	return nil
}

// observe samples and probes every instance concurrently.
func (a *Agent) observe(ctx context.Context, insts []runtime.Instance) []reading {
	reads := make([]reading, len(insts))
	var wg sync.WaitGroup
	for i, in := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reads[i] = reading{inst: in}
			reads[i].s, reads[i].err = a.cfg.Runtime.Sample(ctx, in)
			reads[i].probe = a.probe(ctx, in.Addr)
		}()
	}
	wg.Wait()
	return reads
}

func (a *Agent) probe(ctx context.Context, addr string) time.Duration {
	start := a.cfg.Clock.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		return a.cfg.ProbeTimeout
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return a.cfg.ProbeTimeout
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return a.cfg.ProbeTimeout
	}
	return a.cfg.Clock.Since(start)
}

func (a *Agent) scoreLocked(rd reading) WorkerState {
	id := rd.inst.ID
	ws := WorkerState{ID: id, Name: rd.inst.Name, Addr: rd.inst.Addr, Default: rd.inst.Default, CPULimit: rd.inst.CPULimit}
	av := a.avail[id]
	if av == nil {
		av = score.NewAvailability(20, 3)
		a.avail[id] = av
	}
	av.Observe(rd.probe)
	var u score.Usage
	if rd.err == nil {
		if prev, ok := a.prev[id]; ok {
			u = score.Between(prev, rd.s)
		} else {
			u.Mem = score.Memory(rd.s)
		}
		a.prev[id] = rd.s
	} else if old, ok := a.restored[id]; ok {
		u = score.Usage{CPU: old.CPU, Mem: old.Mem, NetMBps: old.NetMBps}
	}
	ap := av.Score()
	p := a.cfg.Weights.Score(u, ap.Score)
	ws.Score, ws.CPU, ws.Mem, ws.NetMBps, ws.Avail, ws.Times = p.Total, u.CPU, u.Mem, u.NetMBps, ap.Score, av.Times()
	return ws
}

// balancerCountsLocked sums the fresh tallies of every balancer.
func (a *Agent) balancerCountsLocked(now time.Time) (active map[string]int64, requests map[string]uint64) {
	active, requests = map[string]int64{}, map[string]uint64{}
	for name, tr := range a.tallies {
		if now.Sub(tr.at) > 5*a.cfg.Interval {
			delete(a.tallies, name) // that balancer is gone
			continue
		}
		for _, w := range tr.r.Workers {
			active[w.ID] += w.Active
			requests[w.ID] += w.Requests
		}
	}
	return active, requests
}

func (a *Agent) sharesLocked(states []WorkerState) []float64 {
	deltas := make([]float64, len(states))
	total := 0.0
	// Rebuilt from the workers there are: one that left is forgotten.
	reqs := make(map[string]uint64, len(states))
	for i, w := range states {
		if last, ok := a.lastReqs[w.ID]; ok && w.Requests >= last {
			deltas[i] = float64(w.Requests - last)
			total += deltas[i]
		}
		reqs[w.ID] = w.Requests
	}
	a.lastReqs = reqs
	for i := range deltas {
		if total > 0 {
			deltas[i] /= total
		}
	}
	return deltas
}

// act carries out the lifecycle's decisions; it returns the workers that
// are gone.
func (a *Agent) act(ctx context.Context, now time.Time, acts []lifecycle.Action) map[string]bool {
	gone := map[string]bool{}
	for _, ac := range acts {
		switch ac.Kind {
		case lifecycle.ScaleUp, lifecycle.Refill:
			inst, err := a.cfg.Runtime.Start(ctx, a.cfg.Spawn)
			a.mu.Lock()
			if err != nil {
				a.eventLocked(now, "start-failed", "", err.Error())
			} else {
				a.pool.Add(inst.ID, inst.Default, now)
				a.names[inst.ID] = inst.Name
				a.eventLocked(now, ac.Kind, inst.ID, "")
			}
			a.mu.Unlock()
		case lifecycle.Shutdown:
			err := a.cfg.Runtime.Stop(ctx, ac.ID)
			a.mu.Lock()
			if err != nil {
				a.eventLocked(now, "stop-failed", ac.ID, err.Error())
			} else {
				a.pool.Remove(ac.ID)
				delete(a.prev, ac.ID)
				delete(a.avail, ac.ID)
				gone[ac.ID] = true
				a.eventLocked(now, ac.Kind, ac.ID, "")
				delete(a.names, ac.ID)
			}
			a.mu.Unlock()
		default: // sundown, revive: the weight says it
			a.mu.Lock()
			a.eventLocked(now, ac.Kind, ac.ID, "")
			a.mu.Unlock()
		}
	}
	return gone
}

const maxEvents = 200

func (a *Agent) eventLocked(at time.Time, kind, id, detail string) {
	name := a.names[id]
	a.cfg.Log.Info("agent event", "kind", kind, "worker", name, "id", id, "detail", detail)
	a.eventSeq++
	a.events = append(a.events, Event{Seq: a.eventSeq, At: at, Kind: kind, Worker: name, ID: id, Detail: detail})
	if len(a.events) > maxEvents {
		a.events = slices.Clone(a.events[len(a.events)-maxEvents:])
	}
}

// View returns the latest state.
func (a *Agent) View() View {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.view
}

// weight is the worker's share of new requests: its score (higher is
// better, DESIGN §3.4), at least 1 while it serves so a saturated pool
// still takes requests, and 0 once it is draining.
func weight(w WorkerState) float64 {
	if w.State == string(lifecycle.Sundown) {
		return 0
	}
	return max(w.Score, 1)
}

// category is the worker's utilisation category: its lifecycle state,
// or for a draining worker what the same thresholds say of its load.
func category(w WorkerState, c lifecycle.Config) string {
	st := lifecycle.State(w.State)
	if st == lifecycle.Sundown {
		st = c.Category(lifecycle.Medium, 100-w.Score)
	}
	return string(st)
}

// queue is seed 004's ordered queue: workers by descending score.
func queue(seq uint64, states []WorkerState, c lifecycle.Config) weightfeed.Weights {
	m := weightfeed.Weights{Type: weightfeed.TypeWeights, Seq: seq}
	for _, w := range states {
		st := weightfeed.StateActive
		if w.Weight == 0 {
			st = weightfeed.StateSundown
		}
		m.Workers = append(m.Workers, weightfeed.Worker{ID: w.ID, Addr: w.Addr, Score: w.Score,
			Category: category(w, c), State: st, Weight: w.Weight})
	}
	return m
}

func sortWorkers(ws []WorkerState) {
	slices.SortStableFunc(ws, func(x, y WorkerState) int {
		return cmp.Or(cmp.Compare(y.Score, x.Score), strings.Compare(x.ID, y.ID))
	})
}
