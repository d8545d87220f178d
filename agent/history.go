package agent

import "time"

// historyLen bounds the history the dashboard draws (seed 004's Fig. 3
// is utilisation over time): ten minutes of steps at the default 1-s
// interval; each point holds one step's workers, so the memory is
// bounded by historyLen × the pool's size.
const historyLen = 600

// Point is one step of the history: each worker's utilisation and weight.
type Point struct {
	At      int64         `json:"at"` // Unix ms
	Workers []PointWorker `json:"workers"`
}

// PointWorker is one worker at one step.
type PointWorker struct {
	Name   string  `json:"name"`
	CPU    float64 `json:"cpu_pct"`
	Weight float64 `json:"weight"`
	Share  float64 `json:"share"` // of the requests over the step
}

// history is a ring of the last historyLen points.
type history struct {
	points []Point
	next   int // where the next point goes once the ring is full
}

func (h *history) add(at time.Time, states []WorkerState, shares []float64) {
	p := Point{At: at.UnixMilli(), Workers: make([]PointWorker, len(states))}
	for i, w := range states {
		p.Workers[i] = PointWorker{Name: w.Name, CPU: w.CPU, Weight: w.Weight}
		if i < len(shares) {
			p.Workers[i].Share = shares[i]
		}
	}
	if len(h.points) < historyLen {
		h.points = append(h.points, p)
		return
	}
	h.points[h.next] = p
	h.next = (h.next + 1) % historyLen
}

// ordered returns the points oldest first.
func (h *history) ordered() []Point {
	out := make([]Point, 0, len(h.points))
	out = append(out, h.points[h.next:]...)
	return append(out, h.points[:h.next]...)
}

// History is the dashboard's time plot data, oldest step first.
func (a *Agent) History() []Point {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.hist.ordered()
}
