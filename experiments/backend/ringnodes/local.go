// Package ringnodes starts and faults rings of real ringnode servers for
// experiments and tests: as local processes on 127.0.0.1 ports (SIGKILL is
// a real crash) or as containers under docker compose.
package ringnodes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ringside/ringside/internal/freeport"
	"github.com/ringside/ringside/internal/imagebuild"
	"github.com/ringside/ringside/internal/proc"
)

// Ring is a running ring of ringnode servers.
type Ring interface {
	// Addrs lists the servers that are up.
	Addrs() []string
	// Kill crashes a server (SIGKILL).
	Kill(ctx context.Context, addr string) error
	// Restart brings a killed server back with its data, joining the ring.
	Restart(ctx context.Context, addr string) error
	// Add starts a new server that joins the ring; it returns once the
	// server answers.
	Add(ctx context.Context) (string, error)
	Close() error
}

// FindRingnode returns a ringnode binary: $RINGSIDE_RINGNODE, one beside
// the running executable, or a fresh `go build` when run inside the
// ringside module (the common case: go run / go test).
func FindRingnode(ctx context.Context) (string, error) {
	return findBinary(ctx, "ringnode", "RINGSIDE_RINGNODE")
}

func findBinary(ctx context.Context, name, envVar string) (string, error) {
	if p := os.Getenv(envVar); p != "" {
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return imagebuild.Static(ctx, "github.com/ringside/ringside/cmd/"+name)
}

// Options configure a local ring.
type Options struct {
	Bin  string   // ringnode binary
	Dir  string   // data directories and logs go here
	Args []string // extra ringnode flags (timeouts, replicas, …)
	// Secret is the ring's cluster secret (default: a fresh random one,
	// handed to the servers in their environment, not on argv).
	Secret string
}

// Local is a ring of ringnode processes on loopback.
type Local struct {
	opts    Options
	oneProc bool // run servers with GOMAXPROCS=1 (proc.OneProcessor)
	mu      sync.Mutex
	procs   map[string]*proc.Proc
	order   []string
}

// StartLocal starts n servers: the first bootstraps the ring, the others
// join it. It returns when every server is in the ring.
func StartLocal(ctx context.Context, n int, o Options) (*Local, error) {
	if n < 1 {
		return nil, fmt.Errorf("ring of %d servers", n)
	}
	// More servers than cores: one P each. With Go's default every
	// server keeps a thread per core awake and the ring's hops wait on
	// cross-process scheduling (ring-failover at n = 16 on 2 cores:
	// propagation p50 5.1 ms with the default, 4.0 ms with one P).
	if o.Secret == "" {
		o.Secret = NewSecret()
	}
	l := &Local{opts: o, procs: map[string]*proc.Proc{}, oneProc: n > runtime.NumCPU()}
	for range n {
		if _, err := l.Add(ctx); err != nil {
			l.Close()
			return nil, err
		}
	}
	if err := WaitMembers(ctx, l.Addrs(), n); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Addrs lists live servers in the order they were started.
func (l *Local) Addrs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, a := range l.order {
		if p := l.procs[a]; p != nil && !p.Exited() {
			out = append(out, a)
		}
	}
	return out
}

// Down lists the servers that were started and are not running.
func (l *Local) Down() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, a := range l.order {
		if p := l.procs[a]; p != nil && p.Exited() {
			out = append(out, a)
		}
	}
	return out
}

// Add starts a new server joining the live ones.
func (l *Local) Add(ctx context.Context) (string, error) {
	addr, err := freeport.Addr()
	if err != nil {
		return "", err
	}
	if err := l.start(ctx, addr); err != nil {
		return "", err
	}
	l.mu.Lock()
	l.order = append(l.order, addr)
	l.mu.Unlock()
	return addr, nil
}

func (l *Local) start(ctx context.Context, addr string) error { return l.startWith(ctx, addr) }

func (l *Local) startWith(ctx context.Context, addr string, extra ...string) error {
	args := []string{"--addr", addr, "--data", filepath.Join(l.opts.Dir, strings.ReplaceAll(addr, ":", "_"))}
	if live := l.Addrs(); len(live) > 0 {
		args = append(args, "--join", strings.Join(live, ","))
	}
	args = append(append(args, l.opts.Args...), extra...)
	logf, err := os.OpenFile(filepath.Join(l.opts.Dir, strings.ReplaceAll(addr, ":", "_")+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(l.opts.Bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "RINGNODE_SECRET="+l.opts.Secret)
	if l.oneProc {
		cmd.Env = proc.OneProcessor(cmd.Env)
	}
	p, err := proc.Start(cmd, func() { logf.Close() })
	if err != nil {
		logf.Close()
		return fmt.Errorf("ringnode %s: %w", addr, err)
	}
	l.mu.Lock()
	l.procs[addr] = p
	l.mu.Unlock()
	if err := WaitHealthy(ctx, addr, p.Done()); err != nil {
		p.Kill()
		return fmt.Errorf("ringnode %s: %w (log: %s)", addr, err, logf.Name())
	}
	return nil
}

// Kill sends SIGKILL and waits for the process to die.
func (l *Local) Kill(ctx context.Context, addr string) error {
	l.mu.Lock()
	p := l.procs[addr]
	l.mu.Unlock()
	if p == nil {
		return fmt.Errorf("kill %s: no such server", addr)
	}
	p.Signal(syscall.SIGKILL)
	select {
	case <-p.Done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pause stops a server (SIGSTOP) for d and then lets it go on (SIGCONT):
// to its peers, a long garbage-collection pause or a frozen machine.
func (l *Local) Pause(ctx context.Context, addr string, d time.Duration) error {
	l.mu.Lock()
	p := l.procs[addr]
	l.mu.Unlock()
	if p == nil || p.Exited() {
		return fmt.Errorf("pause %s: no such running server", addr)
	}
	p.Signal(syscall.SIGSTOP)
	defer p.Signal(syscall.SIGCONT)
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Restart starts a killed server again on its address and data.
func (l *Local) Restart(ctx context.Context, addr string) error {
	l.mu.Lock()
	p := l.procs[addr]
	l.mu.Unlock()
	if p == nil {
		return fmt.Errorf("restart %s: no such server", addr)
	}
	if !p.Exited() {
		return fmt.Errorf("restart %s: still running", addr)
	}
	return l.start(ctx, addr)
}

// Close kills every server.
func (l *Local) Close() error {
	l.mu.Lock()
	procs := slices.Collect(maps.Values(l.procs))
	l.mu.Unlock()
	for _, p := range procs {
		p.Kill()
	}
	return nil
}

var healthClient = &http.Client{Timeout: time.Second}

// WaitHealthy polls addr's /healthz until it answers 200; exited, if
// closed, means the server died trying.
func WaitHealthy(ctx context.Context, addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := healthClient.Get("http://" + addr + "/healthz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("exited before it was healthy")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("not healthy after 15s")
		}
	}
}

// WaitMembers waits until every server in addrs reports a ring of n and
// holds its serving lease.
func WaitMembers(ctx context.Context, addrs []string, n int) error {
	var last string // the first server not there yet, for the error
	err := Poll(ctx, 15*time.Second, func() (bool, error) {
		for _, a := range addrs {
			st, err := GetStatus(ctx, a)
			switch {
			case err != nil:
				last = err.Error()
			case len(st.Servers) != n || !slices.Contains(st.Servers, a):
				last = fmt.Sprintf("%s sees %d servers %v (leader %s, round %d), want %d with itself", a, len(st.Servers), st.Servers, st.Leader, st.Round, n)
			case !st.Leased:
				last = fmt.Sprintf("%s has no serving lease yet (no majority of the ring confirmed it)", a)
			default:
				continue
			}
			return false, nil
		}
		return true, nil
	})
	if err != nil && last != "" {
		return fmt.Errorf("%w: %s", err, last)
	}
	return err
}

// WaitQuiet waits until every server has finished moving data for the
// metadata it holds.
func WaitQuiet(ctx context.Context, addrs []string) error {
	return Poll(ctx, 30*time.Second, func() (bool, error) {
		for _, a := range addrs {
			st, err := GetStatus(ctx, a)
			if err != nil || st.Events.RebalanceDone < st.Events.MetaApplied {
				return false, nil
			}
		}
		return true, nil
	})
}

// Poll calls f every 20 ms until it is done, fails, or the limit passes.
// Measurements come from the servers' own event timestamps, so the
// interval only costs precision of waiting, not of results — and slower
// polling keeps the status requests from competing with an election for
// the CPU.
func Poll(ctx context.Context, limit time.Duration, f func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := f()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("condition not met within %s", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// NewSecret returns a random cluster secret for a ring the harness starts.
func NewSecret() string {
	b := make([]byte, 16)
	rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
