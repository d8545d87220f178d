package runtime

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringside/ringside/agent/score"
	"github.com/ringside/ringside/internal/freeport"
	"github.com/ringside/ringside/internal/proc"
)

// Process runs workers as local processes on 127.0.0.1, for machines
// without Docker. Stats come from /proc: CPU time from /proc/PID/stat, RSS
// from /proc/PID/statm; there is no per-process network counter, and the
// memory "limit" is the budget given in the spec (default 512 MiB).
type Process struct {
	bin  string
	args []string

	mu    sync.Mutex
	procs map[string]*worker
	seq   int
}

type worker struct {
	*proc.Proc
	inst     Instance
	memMB    int
	throttle chan struct{} // closed to end the throttle SetCPULimit runs
	// throttled is closed once that throttle has continued the worker and
	// returned: a new one starts only then, so that the old one's last
	// SIGCONT cannot land after the new one's SIGSTOP.
	throttled chan struct{}
}

// endThrottle ends the worker's throttle, if any, and waits until it has
// left the worker running. The caller holds Process.mu.
func (pr *worker) endThrottle() {
	if pr.throttle == nil {
		return
	}
	close(pr.throttle)
	<-pr.throttled
	pr.throttle, pr.throttled = nil, nil
}

// NewProcess runs the worker binary bin with extra args.
func NewProcess(bin string, args ...string) *Process {
	return &Process{bin: bin, args: args, procs: map[string]*worker{}}
}

// List returns the live workers.
func (p *Process) List(context.Context) ([]Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Instance
	for _, pr := range p.procs {
		if !pr.Exited() {
			out = append(out, pr.inst)
		}
	}
	return out, nil
}

// Start runs a worker and waits until it answers /healthz.
func (p *Process) Start(ctx context.Context, sp Spec) (Instance, error) {
	port, err := freeport.Port()
	if err != nil {
		return Instance{}, err
	}
	p.mu.Lock()
	p.seq++
	name := sp.Name
	if name == "" {
		name = fmt.Sprintf("worker-%d", p.seq)
	}
	p.mu.Unlock()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := append([]string{"--addr", addr, "--name", name, "--cpu-limit", strconv.FormatFloat(sp.CPULimit, 'f', -1, 64)}, p.args...)
	cmd := exec.Command(p.bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// GOMAXPROCS matches the limit so the Go runtime does not spin up
	// threads the worker may not use.
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(threadsFor(sp.CPULimit)))
	started, err := proc.Start(cmd, nil)
	if err != nil {
		return Instance{}, fmt.Errorf("worker %s: %w", name, err)
	}
	pr := &worker{Proc: started, memMB: sp.MemoryMB}
	if pr.memMB == 0 {
		pr.memMB = 512
	}
	pr.inst = Instance{ID: strconv.Itoa(pr.Pid()), Name: name, Addr: addr, Default: sp.Default, CPULimit: sp.CPULimit}
	if err := waitHealthy(ctx, addr, pr.Done()); err != nil {
		pr.Kill()
		return Instance{}, fmt.Errorf("worker %s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	p.mu.Lock()
	p.procs[pr.inst.ID] = pr
	p.mu.Unlock()
	return pr.inst, nil
}

// threadsFor is how many CPUs a worker limited to limit can use at once,
// its GOMAXPROCS: the limit rounded up, at least one.
func threadsFor(limit float64) int { return max(1, int(limit+0.999)) }

func waitHealthy(ctx context.Context, addr string, done <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("exited before it was healthy")
		case <-ctx.Done():
			return fmt.Errorf("not healthy: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// clockTick is USER_HZ, which Linux fixes at 100 for /proc on every
// architecture Go supports.
const clockTick = 100

// Sample reads the worker's counters from /proc.
func (p *Process) Sample(_ context.Context, inst Instance) (score.Sample, error) {
	p.mu.Lock()
	pr := p.procs[inst.ID]
	p.mu.Unlock()
	if pr == nil {
		return score.Sample{}, fmt.Errorf("worker %s: unknown", inst.Name)
	}
	now := time.Now()
	stat, err := os.ReadFile("/proc/" + inst.ID + "/stat")
	if err != nil {
		return score.Sample{}, fmt.Errorf("worker %s: %w", inst.Name, err)
	}
	// Fields after the parenthesised command name, which may hold spaces.
	i := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return score.Sample{}, fmt.Errorf("worker %s: short /proc stat", inst.Name)
	}
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	statm, err := os.ReadFile("/proc/" + inst.ID + "/statm")
	if err != nil {
		return score.Sample{}, fmt.Errorf("worker %s: %w", inst.Name, err)
	}
	var size, rss uint64
	fmt.Sscan(string(statm), &size, &rss)
	return score.Sample{
		At:         now,
		CPUTotal:   (utime + stime) * (1e9 / clockTick),
		OnlineCPUs: threadsFor(inst.CPULimit),
		CPULimit:   inst.CPULimit,
		MemUsage:   rss * uint64(os.Getpagesize()),
		MemLimit:   uint64(pr.memMB) << 20,
	}, nil
}

// Stop terminates a worker (SIGTERM, then SIGKILL after 2 s).
func (p *Process) Stop(_ context.Context, id string) error {
	p.mu.Lock()
	pr := p.procs[id]
	delete(p.procs, id)
	if pr != nil {
		pr.endThrottle()
	}
	p.mu.Unlock()
	if pr == nil {
		return nil
	}
	pr.Signal(syscall.SIGCONT) // a stopped process cannot take SIGTERM's turn
	pr.Stop(syscall.SIGTERM, 2*time.Second)
	return nil
}

// SetCPULimit slows a running worker down to cpus from outside, as
// docker update --cpus does to a container: the worker's own throttle
// stays at the limit it started with, and the process may use cpus of CPU
// time in every period, stopped (SIGSTOP) once it has until the period
// ends (cpuQuota, the kernel's CFS bandwidth rule). A limit at or above
// the one it started with ends the throttle.
func (p *Process) SetCPULimit(_ context.Context, id string, cpus float64) error {
	if !(cpus > 0) || cpus > 64 {
		return fmt.Errorf("cpu limit %v: want (0, 64]", cpus)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.procs[id]
	if pr == nil || pr.Exited() {
		return fmt.Errorf("worker %s: not running", id)
	}
	pr.endThrottle()
	if pr.inst.CPULimit == 0 || cpus >= pr.inst.CPULimit {
		return nil
	}
	pr.throttle, pr.throttled = make(chan struct{}), make(chan struct{})
	q := cpuQuota{
		quota:   time.Duration(cpus * float64(quotaPeriod)),
		period:  quotaPeriod,
		threads: threadsFor(pr.inst.CPULimit),
	}
	go pr.throttleTo(q, pr.throttle, pr.throttled)
	return nil
}

// throttleTo holds the worker to q until stop is closed or it exits, and
// leaves it running before it closes done.
func (pr *worker) throttleTo(q cpuQuota, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	defer pr.Signal(syscall.SIGCONT)
	clock := int32(^pr.Pid()<<3 | cpuClockSched)
	cpu := func() (time.Duration, bool) {
		var ts unix.Timespec
		if unix.ClockGettime(clock, &ts) != nil {
			return 0, false // exited
		}
		return time.Duration(ts.Nano()), true
	}
	for {
		start := time.Now()
		at, ok := cpu()
		if !ok {
			return
		}
		stopped := false
		for {
			left := q.period - time.Since(start)
			if left <= 0 {
				break
			}
			now, ok := cpu()
			if !ok {
				return
			}
			halt, wait := q.next(now-at, left)
			if halt && !stopped {
				pr.Signal(syscall.SIGSTOP)
				stopped = true
			}
			select {
			case <-stop:
				return
			case <-pr.Done():
				return
			case <-time.After(wait):
			}
		}
		if stopped {
			pr.Signal(syscall.SIGCONT)
		}
	}
}

// cpuClockSched is the kernel's CPUCLOCK_SCHED: a clock id made from a
// process id with it reads the CPU time all the process's threads used,
// in nanoseconds (clock_getcpuclockid(3) builds the same id).
const cpuClockSched = 2

// RemoveAll stops every worker.
func (p *Process) RemoveAll(ctx context.Context) error {
	list, _ := p.List(ctx)
	p.mu.Lock()
	for id, pr := range p.procs {
		if pr.Exited() {
			delete(p.procs, id)
		}
	}
	p.mu.Unlock()
	for _, in := range list {
		p.Stop(ctx, in.ID)
	}
	return nil
}
