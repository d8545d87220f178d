package loadreport

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Meter measures a worker's load from its request path: Begin and End
// around each request cost two atomic adds and a short critical section,
// nothing a request would notice.
type Meter struct {
	rif atomic.Int64
	// cpus is the CPUs the worker may use, read when a report is made:
	// docker update --cpus changes it while the worker runs.
	cpus func() float64

	mu      sync.Mutex
	born    time.Time
	latency LatencyByRIF
	sec     int64 // the second the counts below belong to
	n, errs int   // this second
	last    struct {
		n, errs int
	} // the last complete second
	cpuAt   time.Time
	cpuUsed time.Duration
	util    float64
}

// latencyTau is the latency EWMAs' time constant.
const latencyTau = time.Second

// NewMeter returns a meter; cpus reports the CPUs the worker may use (nil:
// CPUCapacity).
func NewMeter(cpus func() float64) *Meter {
	if cpus == nil {
		cpus = CPUCapacity
	}
	return &Meter{cpus: cpus, born: time.Now()}
}

// Begin counts a request in flight and returns the requests that were in
// flight when it arrived, for End.
func (m *Meter) Begin() int { return int(m.rif.Add(1) - 1) }

// End counts a request done after d; rif is what Begin returned.
func (m *Meter) End(now time.Time, d time.Duration, failed bool, rif int) {
	m.rif.Add(-1)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.roll(now)
	m.n++
	if failed {
		m.errs++
	}
	m.latency.Add(now.Sub(m.born), rif, d)
}

// roll moves the counts on to now's second. m.mu must be held.
func (m *Meter) roll(now time.Time) {
	sec := now.Unix()
	switch {
	case sec == m.sec:
		return
	case sec == m.sec+1:
		m.last.n, m.last.errs = m.n, m.errs
	default:
		m.last.n, m.last.errs = 0, 0
	}
	m.sec, m.n, m.errs = sec, 0, 0
}

// Report is the load at now.
func (m *Meter) Report(now time.Time) Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.roll(now)
	m.utilisation(now)
	rif := max(m.rif.Load(), 0)
	return Report{
		RIF: rif, LatencyMS: float64(m.latency.Estimate(int(rif))) / float64(time.Millisecond),
		QPS: float64(m.last.n), EPS: float64(m.last.errs), Utilization: m.util,
	}
}

// utilisation refreshes the CPU use at most every 250 ms: the process's
// CPU time over the wall time since, per CPU it may use. m.mu must be held.
func (m *Meter) utilisation(now time.Time) {
	if now.Sub(m.cpuAt) < 250*time.Millisecond {
		return
	}
	used := processCPU()
	if !m.cpuAt.IsZero() {
		wall := now.Sub(m.cpuAt)
		if cpus := m.cpus(); cpus > 0 && wall > 0 {
			m.util = float64(used-m.cpuUsed) / float64(wall) / cpus
		}
	}
	m.cpuAt, m.cpuUsed = now, used
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPUCapacity is the CPUs this process may use: its cgroup's CPU quota
// (v2 cpu.max, v1 cpu.cfs_quota_us) when it has one, else GOMAXPROCS.
func CPUCapacity() float64 {
	if b, err := os.ReadFile("/sys/fs/cgroup/cpu.max"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 && f[0] != "max" {
			if q, p := atof(f[0]), atof(f[1]); q > 0 && p > 0 {
				return q / p
			}
		}
	}
	q, errQ := os.ReadFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
	p, errP := os.ReadFile("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
	if errQ == nil && errP == nil {
		if q, p := atof(string(q)), atof(string(p)); q > 0 && p > 0 {
			return q / p
		}
	}
	return float64(runtime.GOMAXPROCS(0))
}

func atof(s string) float64 {
	x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0
	}
	return x
}
