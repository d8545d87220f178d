// Package score turns raw container statistics and response times into
// seed 004's worker score (DESIGN §3.3): s = w_c·s_c + w_m·s_m + w_n·s_n +
// w_a·s_a, each part 100 − usage clamped to [0, 100], so 100 means idle
// and healthy. Everything here is pure arithmetic with guarded divisions.
package score

import (
	"fmt"
	"math"
	"time"
)

// Sample is one reading of a worker's counters, as Docker's stats API or
// /proc gives them.
type Sample struct {
	At          time.Time
	CPUTotal    uint64  // container CPU time, ns
	SystemCPU   uint64  // host CPU time, ns (0 when the runtime has none: then At is used)
	OnlineCPUs  int     // host CPUs the container may see
	CPULimit    float64 // CPUs the container may use (0: no limit → OnlineCPUs)
	MemUsage    uint64  // bytes
	MemInactive uint64  // inactive_file (cgroup v2) / total_inactive_file (v1)
	MemLimit    uint64  // bytes (0: unknown → memory part reads 0 %)
	NetBytes    uint64  // rx + tx, all interfaces
}

// Usage is what a pair of samples says.
type Usage struct {
	CPU     float64 // % of the container's CPU limit, 0–100
	Mem     float64 // % of the memory limit, 0–100
	NetMBps float64 // MB/s, rx+tx
}

// Between computes usage from the previous and the current sample. Docker's
// formula Δcpu/Δsystem·onlineCPUs·100 gives % of one CPU; dividing by the
// CPU limit makes 100 mean "using everything it may". A runtime without a
// system counter (SystemCPU 0) uses wall time instead.
func Between(prev, cur Sample) Usage {
	var u Usage
	cpus := cur.CPULimit
	if cpus <= 0 {
		cpus = float64(max(cur.OnlineCPUs, 1))
	}
	dCPU := float64(cur.CPUTotal) - float64(prev.CPUTotal)
	switch {
	case cur.SystemCPU > 0 && cur.SystemCPU > prev.SystemCPU && cur.OnlineCPUs > 0:
		dSys := float64(cur.SystemCPU - prev.SystemCPU)
		u.CPU = dCPU / dSys * float64(cur.OnlineCPUs) * 100 / cpus
	case cur.SystemCPU == 0 && cur.At.After(prev.At):
		u.CPU = dCPU / float64(cur.At.Sub(prev.At).Nanoseconds()) * 100 / cpus
	}
	u.CPU = clamp(u.CPU)
	u.Mem = Memory(cur)
	if dt := cur.At.Sub(prev.At).Seconds(); dt > 0 && cur.NetBytes >= prev.NetBytes {
		u.NetMBps = float64(cur.NetBytes-prev.NetBytes) / (dt * 1e6)
	}
	return u
}

// Memory is (usage − inactive_file) / limit · 100: page cache the kernel
// can drop is not pressure.
func Memory(s Sample) float64 {
	if s.MemLimit == 0 {
		return 0
	}
	used := float64(s.MemUsage)
	if s.MemInactive < s.MemUsage {
		used -= float64(s.MemInactive)
	}
	return clamp(used / float64(s.MemLimit) * 100)
}

// Weights are the w_X of the score. They need not sum to 1, but with a
// sum of 1 the score stays in [0, 100].
type Weights struct {
	CPU, Mem, Net, Avail float64
	// NetCapacityMBps is what counts as 100 % network use (the paper's
	// percentage-of-previous-reading is undefined at 0 and swings wildly,
	// so DESIGN reads usage against a capacity).
	NetCapacityMBps float64
}

// DefaultWeights favour CPU, the resource a CPU-bound worker exhausts.
var DefaultWeights = Weights{CPU: 0.5, Mem: 0.15, Net: 0.1, Avail: 0.25, NetCapacityMBps: 100}

// Validate rejects weights a score cannot be made from.
func (w Weights) Validate() error {
	for name, v := range map[string]float64{"cpu": w.CPU, "mem": w.Mem, "net": w.Net, "avail": w.Avail} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("score weight %s = %v: must be a finite number ≥ 0", name, v)
		}
	}
	if w.CPU+w.Mem+w.Net+w.Avail == 0 {
		return fmt.Errorf("score weights: all zero")
	}
	if !(w.NetCapacityMBps > 0) {
		return fmt.Errorf("score network capacity %v MB/s: must be > 0", w.NetCapacityMBps)
	}
	return nil
}

// Parts are the four sub-scores and their weighted total.
type Parts struct {
	CPU, Mem, Net, Avail, Total float64
}

// Score combines usage and the availability score into seed 004's s.
func (w Weights) Score(u Usage, avail float64) Parts {
	p := Parts{
		CPU:   clamp(100 - u.CPU),
		Mem:   clamp(100 - u.Mem),
		Net:   clamp(100 - u.NetMBps/w.NetCapacityMBps*100),
		Avail: clamp(avail),
	}
	p.Total = clamp(w.CPU*p.CPU + w.Mem*p.Mem + w.Net*p.Net + w.Avail*p.Avail)
	return p
}

func clamp(x float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return max(0, min(100, x))
}
