package score

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Unix(1000, 0)

func TestBetweenDockerFormula(t *testing.T) {
	prev := Sample{At: t0, CPUTotal: 1e9, SystemCPU: 100e9, OnlineCPUs: 2, NetBytes: 1e6}
	cur := Sample{At: t0.Add(2 * time.Second), CPUTotal: 1.5e9, SystemCPU: 104e9, OnlineCPUs: 2,
		MemUsage: 600 << 20, MemInactive: 100 << 20, MemLimit: 1000 << 20, NetBytes: 5e6}
	u := Between(prev, cur)
	// Δcpu/Δsys·cpus·100 = 0.5/4·2·100 = 25 % of one CPU of the two it may use → 12.5 %.
	assert.InDelta(t, 12.5, u.CPU, 1e-9)
	assert.InDelta(t, 50, u.Mem, 1e-9) // (600−100)/1000
	assert.InDelta(t, 2, u.NetMBps, 1e-9)

	cur.CPULimit = 0.5 // a container limited to half a CPU, using a quarter: 50 %
	assert.InDelta(t, 50, Between(prev, cur).CPU, 1e-9)
}

func TestBetweenGuards(t *testing.T) {
	s := Sample{At: t0, CPUTotal: 5, SystemCPU: 10, OnlineCPUs: 1}
	u := Between(s, s) // no time passed, no system delta
	assert.Zero(t, u.CPU)
	assert.Zero(t, u.NetMBps)
	assert.Zero(t, u.Mem, "no limit known")
	// Counter reset (container restarted): no negative usage.
	u = Between(Sample{At: t0, CPUTotal: 9e9, NetBytes: 9e9}, Sample{At: t0.Add(time.Second), CPUTotal: 1, NetBytes: 1})
	assert.Zero(t, u.CPU)
	assert.Zero(t, u.NetMBps)
	// Wall-clock fallback for runtimes without a system counter.
	u = Between(Sample{At: t0}, Sample{At: t0.Add(time.Second), CPUTotal: 3e8, OnlineCPUs: 4, CPULimit: 1})
	assert.InDelta(t, 30, u.CPU, 1e-9)
}

func TestScore(t *testing.T) {
	w := Weights{CPU: 0.5, Mem: 0.2, Net: 0.1, Avail: 0.2, NetCapacityMBps: 10}
	require.NoError(t, w.Validate())
	p := w.Score(Usage{CPU: 40, Mem: 25, NetMBps: 5}, 90)
	assert.InDelta(t, 60, p.CPU, 1e-9)
	assert.InDelta(t, 75, p.Mem, 1e-9)
	assert.InDelta(t, 50, p.Net, 1e-9)
	assert.InDelta(t, 0.5*60+0.2*75+0.1*50+0.2*90, p.Total, 1e-9)
	assert.Equal(t, 100.0, w.Score(Usage{}, 100).Total)
	assert.Equal(t, 0.0, w.Score(Usage{CPU: 200, Mem: 200, NetMBps: 1e9}, -5).Total)

	assert.ErrorContains(t, Weights{CPU: -1, NetCapacityMBps: 1}.Validate(), "score weight cpu")
	assert.ErrorContains(t, Weights{NetCapacityMBps: 1}.Validate(), "all zero")
	assert.ErrorContains(t, Weights{CPU: 1}.Validate(), "network capacity")
}

func TestAvailabilityFormula(t *testing.T) {
	a := NewAvailability(8, 2)
	a.Floor = 0
	assert.Equal(t, 100.0, a.Score().Score, "no data: presumed available")
	for _, ms := range []float64{10, 10, 10, 10} {
		a.Observe(time.Duration(ms * float64(time.Millisecond)))
	}
	p := a.Score()
	assert.InDelta(t, 100, p.Score, 1e-9, "steady at its best")
	assert.Zero(t, p.Penalty)
	assert.Zero(t, p.Trend)

	// Slowing down: 10,10,10,10,20,40.
	a.Observe(20 * time.Millisecond)
	a.Observe(40 * time.Millisecond)
	p = a.Score()
	avg := 100.0 / 6
	eff := 0.3*40 + 0.7*avg
	base := 100 * math.Pow(10/eff, 1.5)
	pen := 20 * (1 - math.Exp(-(eff - 20)))
	trend := (10.0 - (10+20+40)/3.0) / 10
	assert.InDelta(t, eff, p.Effective, 1e-9)
	assert.InDelta(t, base, p.Base, 1e-9)
	assert.InDelta(t, pen, p.Penalty, 1e-9)
	assert.InDelta(t, trend, p.Trend, 1e-9)
	assert.InDelta(t, max(0, base-pen+10*trend), p.Score, 1e-9)

	// The window slides: old fast times leave.
	for range 8 {
		a.Observe(40 * time.Millisecond)
	}
	assert.Equal(t, []float64{40, 40, 40, 40, 40, 40, 40, 40}, a.Times())
	assert.InDelta(t, 100, a.Score().Score, 1e-9, "uniformly slow is its own best")
}

func TestAvailabilityZeroTimes(t *testing.T) {
	a := NewAvailability(4, 1)
	a.Floor = 0
	for range 4 {
		a.Observe(0)
	}
	p := a.Score()
	assert.False(t, math.IsNaN(p.Score))
	assert.Equal(t, 100.0, p.Score)
}

func TestAvailabilityFloor(t *testing.T) {
	a := NewAvailability(8, 2)
	for _, us := range []int{300, 1200, 500, 900} {
		a.Observe(time.Duration(us) * time.Microsecond)
	}
	assert.Equal(t, 100.0, a.Score().Score, "jitter below the 2 ms resolution is not unavailability")
	a.Observe(50 * time.Millisecond)
	assert.Less(t, a.Score().Score, 50.0)
}
