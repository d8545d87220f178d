// Package lifecycle is seed 004's worker state machine (Figure 2) for a
// pool of workers, as a pure core: Step takes the time and what was
// observed and returns the actions the agent should carry out. It never
// touches a container itself.
//
// Per worker: Low / Medium / High utilisation with hysteresis; Sundown when
// utilisation stays below the low threshold for t_low and the worker is not
// a default one (and the pool stays at or above its minimum); Shutdown once
// a sundown worker has no active connection. For the pool: sustained High
// scales up (reviving a sundown worker first) up to the maximum, and a pool
// below its minimum is refilled at once.
package lifecycle

import (
	"fmt"
	"slices"
	"time"
)

// State of one worker.
type State string

const (
	Low     State = "low"
	Medium  State = "medium"
	High    State = "high"
	Sundown State = "sundown"
)

// Config holds the thresholds (utilisation %, 0–100) and times.
type Config struct {
	Low, High    float64       // category thresholds; default 30 and 75
	Hysteresis   float64       // margin to leave a category; default 5
	SundownAfter time.Duration // t_low; default 30 s
	ScaleUpAfter time.Duration // how long the pool must stay High; default 10 s
	DrainGrace   time.Duration // minimum time in Sundown before Shutdown, so balancers have seen weight 0; default 2 s
	Min, Max     int           // worker count bounds (sundown workers not counted); default 1 and 8
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Low, 30)
	def(&c.High, 75)
	def(&c.Hysteresis, 5)
	defD(&c.SundownAfter, 30*time.Second)
	defD(&c.ScaleUpAfter, 10*time.Second)
	defD(&c.DrainGrace, 2*time.Second)
	if c.Min == 0 {
		c.Min = 1
	}
	if c.Max == 0 {
		c.Max = max(8, c.Min)
	}
	return c
}

// Validate names the first inconsistent setting.
func (c Config) Validate() error {
	switch {
	case c.Low < 0 || c.High > 100 || c.Low >= c.High:
		return fmt.Errorf("thresholds low=%v high=%v: want 0 ≤ low < high ≤ 100", c.Low, c.High)
	case c.Hysteresis < 0 || c.Low+c.Hysteresis >= c.High-c.Hysteresis:
		return fmt.Errorf("hysteresis %v: must be ≥ 0 and leave a medium band between low+h and high−h", c.Hysteresis)
	case c.Min < 1 || c.Max < c.Min:
		return fmt.Errorf("workers min=%d max=%d: want 1 ≤ min ≤ max", c.Min, c.Max)
	case c.SundownAfter < 0 || c.ScaleUpAfter < 0 || c.DrainGrace < 0:
		return fmt.Errorf("durations must not be negative")
	}
	return nil
}

// Worker is one worker's lifecycle record; exported so the agent can
// persist it and resume.
type Worker struct {
	ID      string    `json:"id"`
	Default bool      `json:"default"`
	State   State     `json:"state"`
	Since   time.Time `json:"since"` // when State was entered
}

// Observation is what the agent knows of a worker at a step.
type Observation struct {
	ID          string
	Utilisation float64 // 100 − score
	Active      int64   // connections in flight, from the balancers
}

// Action kinds.
const (
	ScaleUp  = "scale-up" // start a new worker
	Revive   = "revive"   // a sundown worker takes load again
	SundownA = "sundown"  // weight 0 from now on; drain
	Shutdown = "shutdown" // stop and remove the worker
	Refill   = "refill"   // below minimum: start a worker now
)

// Action is one thing the agent must do.
type Action struct {
	Kind string
	ID   string // the worker, except for ScaleUp and Refill
}

// Pool is the state machine over all workers.
type Pool struct {
	cfg       Config
	workers   []*Worker // in order of addition
	highSince time.Time // zero: the pool is not High
}

// NewPool returns an empty pool; cfg gets its defaults and is validated.
func NewPool(cfg Config) (*Pool, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Pool{cfg: cfg}, nil
}

// Config returns the pool's settings.
func (p *Pool) Config() Config { return p.cfg }

// Add registers a worker in state Medium (nothing is known of it yet).
// Adding a known ID is a no-op.
func (p *Pool) Add(id string, isDefault bool, now time.Time) {
	if p.find(id) != nil {
		return
	}
	p.workers = append(p.workers, &Worker{ID: id, Default: isDefault, State: Medium, Since: now})
}

// Restore installs persisted records (a restarted agent resumes).
func (p *Pool) Restore(ws []Worker) {
	p.workers = p.workers[:0]
	for _, w := range ws {
		p.workers = append(p.workers, &w)
	}
}

// Remove forgets a worker (it is gone: shut down, or died).
func (p *Pool) Remove(id string) {
	p.workers = slices.DeleteFunc(p.workers, func(w *Worker) bool { return w.ID == id })
}

// Workers returns copies of the records.
func (p *Pool) Workers() []Worker {
	out := make([]Worker, len(p.workers))
	for i, w := range p.workers {
		out[i] = *w
	}
	return out
}

// Get returns a worker's record.
func (p *Pool) Get(id string) (Worker, bool) {
	if w := p.find(id); w != nil {
		return *w, true
	}
	return Worker{}, false
}

func (p *Pool) find(id string) *Worker {
	for _, w := range p.workers {
		if w.ID == id {
			return w
		}
	}
	return nil
}

// Serving counts workers that take load (not sundown).
func (p *Pool) Serving() int {
	n := 0
	for _, w := range p.workers {
		if w.State != Sundown {
			n++
		}
	}
	return n
}

// Category applies the thresholds with hysteresis: a worker enters Low
// below low and leaves it only above low+h; enters High above high and
// leaves it only below high−h.
func (c Config) Category(cur State, u float64) State {
	switch {
	case u >= c.High:
		return High
	case u < c.Low:
		return Low
	case cur == Low && u <= c.Low+c.Hysteresis:
		return Low
	case cur == High && u >= c.High-c.Hysteresis:
		return High
	}
	return Medium
}

// Step advances the pool to now with the observations (workers without
// one keep their state) and returns the actions, in a deterministic order.
func (p *Pool) Step(now time.Time, obs []Observation) []Action {
	var acts []Action
	byID := make(map[string]Observation, len(obs))
	for _, o := range obs {
		byID[o.ID] = o
	}
	sum, n := 0.0, 0
	for _, w := range p.workers {
		o, ok := byID[w.ID]
		if w.State == Sundown {
			if ok && o.Active == 0 && now.Sub(w.Since) >= p.cfg.DrainGrace {
				acts = append(acts, Action{Shutdown, w.ID})
			}
			continue
		}
		if !ok {
			continue
		}
		sum += o.Utilisation
		n++
		if next := p.cfg.Category(w.State, o.Utilisation); next != w.State {
			w.State, w.Since = next, now
		}
	}

	// Pool level: sustained High adds capacity.
	serving := p.Serving()
	if n > 0 && sum/float64(n) >= p.cfg.High {
		if p.highSince.IsZero() {
			p.highSince = now
		}
	} else {
		p.highSince = time.Time{}
	}
	switch {
	case serving < p.cfg.Min:
		for range p.cfg.Min - serving {
			acts = append(acts, Action{Kind: Refill})
		}
	case !p.highSince.IsZero() && now.Sub(p.highSince) >= p.cfg.ScaleUpAfter && serving < p.cfg.Max:
		p.highSince = now // the next one needs another sustained window
		if w := p.lastSundown(); w != nil {
			w.State, w.Since = Medium, now
			acts = append(acts, Action{Revive, w.ID})
		} else {
			acts = append(acts, Action{Kind: ScaleUp})
		}
	case p.highSince.IsZero():
		// Sundown at most one worker a step, never below the minimum, and
		// never while the pool is busy.
		for _, w := range p.workers {
			if w.State == Low && !w.Default && now.Sub(w.Since) >= p.cfg.SundownAfter && serving > p.cfg.Min {
				w.State, w.Since = Sundown, now
				acts = append(acts, Action{SundownA, w.ID})
				break
			}
		}
	}
	return acts
}

func (p *Pool) lastSundown() *Worker {
	for i := len(p.workers) - 1; i >= 0; i-- {
		if p.workers[i].State == Sundown {
			return p.workers[i]
		}
	}
	return nil
}
