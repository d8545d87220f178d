package kube

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ringside/ringside/bld/balance"
	"github.com/ringside/ringside/internal/imagebuild"
	childproc "github.com/ringside/ringside/internal/proc" // proc names this package's elector process
)

// Processes is the process backend: one elector process per replica,
// against the cluster's API server, so that SIGKILL and SIGTERM are real.
type Processes struct {
	c   *Cluster
	bin string

	mu      sync.Mutex
	procs   map[string]*proc // by elector id (namespace/pod)
	crashes []crash
	// The ringside.io/balanced strategy controller's two replicas, once a
	// cle-balanced application is deployed.
	controllers []*exec.Cmd
	// logDir, when set, keeps every elector's debug log (Cluster.KeepLogs).
	logDir string
}

func (ps *Processes) keepLogs(dir string) {
	ps.mu.Lock()
	ps.logDir = dir
	ps.mu.Unlock()
}

type proc struct {
	cmd       *exec.Cmd
	done      chan struct{}
	serving   chan string // the sidecar's address, once
	addr      string
	ns        string
	app       string
	stderr    tail
	signalled atomic.Bool // exits after this are ours, not crashes
}

type crash struct {
	ns  string
	err error
}

// deploy creates the Pods bound to nodes round-robin from offset and
// starts one elector process per replica, side by side as a Deployment's
// replicas start.
func (p *Processes) deploy(ctx context.Context, ns string, apps []App, offset int, alg, lock string, t Timing) (map[string]string, error) {
	if alg == balance.CLEBalanced {
		if err := p.startControllers(ctx); err != nil {
			return nil, err
		}
	}
	podNode := map[string]string{}
	for _, app := range apps {
		app.Annotations = strategyAnnotations(alg, t)
		pods, err := p.c.Pods(ctx, ns, app, offset)
		if err != nil {
			return nil, err
		}
		offset += app.Replicas
		for _, pn := range pods {
			podNode[ns+"/"+pn[0]] = pn[1]
		}
		var extra []string
		if at := app.campaignAt(); at != "" {
			extra = []string{"--campaign-at", at}
		}
		errs := make([]error, len(pods))
		var wg sync.WaitGroup
		for i, pn := range pods {
			wg.Go(func() { errs[i] = p.Elect(ns, app.Name, pn[0], pn[1], alg, lock, t, extra...) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	}
	return podNode, nil
}

// Elect starts one elector process for a replica; extra flags come last,
// so they override (--kubeconfig through a fault relay, --clock-rate).
func (ps *Processes) Elect(ns, app, pod, node, alg, lock string, t Timing, extra ...string) error {
	ps.mu.Lock()
	logDir := ps.logDir
	ps.mu.Unlock()
	level := "error" // electors log errors only, kept for Crashed
	if logDir != "" {
		level = "debug" // Cluster.KeepLogs
	}
	// Port 0: the elector binds a free port itself (it advertises what it
	// bound), where picking one here could race other processes for it.
	cmd := exec.Command(ps.bin, "--kubeconfig", ps.c.kubeconfig, "--algorithm", alg, "--lock", lock,
		"--election", app, "--namespace", ns, "--id", pod, "--node", node, "--http", "127.0.0.1:0", "--events",
		"--lease-duration", t.Lease.String(), "--renew-deadline", t.Renew.String(), "--retry-period", t.Retry.String(),
		"--log-level", level)
	cmd.Args = append(cmd.Args, extra...)
	// One processor each: the experiments start three to seven
	// applications of five electors at once, and an elector's work is a
	// few requests a second.
	cmd.Env = childproc.OneProcessor(os.Environ())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), serving: make(chan string, 1), ns: ns, app: app}
	cmd.Stderr = &p.stderr // a bounded tail, for Crashed
	var logFile *os.File
	if logDir != "" {
		if logFile, err = os.Create(filepath.Join(logDir, ns+"_"+pod+".log")); err != nil {
			return fmt.Errorf("elector %s/%s: %w", ns, pod, err)
		}
		cmd.Stderr = io.MultiWriter(&p.stderr, logFile)
	}
	launched := time.Now()
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		return fmt.Errorf("start elector %s/%s: %w", ns, pod, err)
	}
	ps.c.record(Event{TS: launched, Event: "launched", ID: ns + "/" + pod, Election: ns + "/" + app})
	ps.mu.Lock()
	ps.procs[ns+"/"+pod] = p
	ps.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := servingAt(sc.Bytes()); ok {
				p.serving <- addr
				continue
			}
			if e, ok := parseEvent(sc.Bytes(), ns); ok {
				ps.c.record(e)
			}
		}
		err := cmd.Wait()
		if logFile != nil {
			logFile.Close()
		}
		if err != nil && !p.signalled.Load() {
			ps.mu.Lock()
			ps.crashes = append(ps.crashes, crash{ns: ns, err: fmt.Errorf("elector %s/%s exited: %w: %s", ns, pod, err, p.stderr.String())})
			ps.mu.Unlock()
		}
		close(p.done)
	}()
	return nil
}

// Sidecar returns the base URL of pod's elector sidecar API, once the
// elector has said where it serves it, and its process ID (the
// throughput experiments measure the process).
func (ps *Processes) Sidecar(ctx context.Context, ns, pod string) (url string, pid int, err error) {
	ps.mu.Lock()
	p := ps.procs[ns+"/"+pod]
	ps.mu.Unlock()
	if p == nil {
		return "", 0, fmt.Errorf("no elector %s/%s", ns, pod)
	}
	if p.addr == "" {
		select {
		case p.addr = <-p.serving:
		case <-p.done:
			return "", 0, fmt.Errorf("elector %s/%s exited: %s", ns, pod, p.stderr.String())
		case <-ctx.Done():
			return "", 0, ctx.Err()
		}
	}
	return "http://" + p.addr, p.cmd.Process.Pid, nil
}

func (ps *Processes) crashed(ns string) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var errs []error
	for _, cr := range ps.crashes {
		if cr.ns == ns {
			errs = append(errs, cr.err)
		}
	}
	return errors.Join(errs...)
}

func (ps *Processes) signal(ctx context.Context, ns, pod string, sig syscall.Signal) (time.Time, error) {
	ps.mu.Lock()
	p := ps.procs[ns+"/"+pod]
	ps.mu.Unlock()
	if p == nil {
		return time.Time{}, fmt.Errorf("no elector %s/%s", ns, pod)
	}
	if sig == syscall.SIGTERM {
		// As on a cluster, where a Pod's deletion is what makes its
		// kubelet send SIGTERM: the Pod is marked deleted first (with no
		// kubelet here the mark stays), so what watches the Pods — the
		// strategy controller — sees the candidate leaving. The signal's
		// instant is still the SIGTERM's.
		err := ps.c.CS.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return time.Time{}, fmt.Errorf("delete pod %s/%s: %w", ns, pod, err)
		}
	}
	at := time.Now()
	p.signalled.Store(true)
	p.cmd.Process.Signal(sig)
	if sig == syscall.SIGKILL {
		ps.c.record(Event{TS: at, Event: "killed", ID: ns + "/" + pod, Election: ns + "/" + p.app})
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return at, ctx.Err()
	}
	return at, nil
}

// Freeze stops pod's elector with SIGSTOP (on) or lets it go on with
// SIGCONT: a paused process, not a lost one.
func (ps *Processes) Freeze(ns, pod string, on bool) error {
	ps.mu.Lock()
	p := ps.procs[ns+"/"+pod]
	ps.mu.Unlock()
	if p == nil {
		return fmt.Errorf("no elector %s/%s", ns, pod)
	}
	sig := syscall.SIGCONT
	if on {
		sig = syscall.SIGSTOP
	}
	return p.cmd.Process.Signal(sig)
}

// stop kills every elector in ns.
func (ps *Processes) stop(ns string) {
	ps.mu.Lock()
	var stopping []*proc
	for k, p := range ps.procs {
		if p.ns == ns {
			stopping = append(stopping, p)
			delete(ps.procs, k)
		}
	}
	ps.mu.Unlock()
	for _, p := range stopping {
		p.signalled.Store(true)
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
	// The namespace never finishes deleting here (no controller manager):
	// remove what its killed candidates registered, as its deletion
	// would, so the strategy controller does not ask them for ever.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ps.c.CS.CoordinationV1alpha2().LeaseCandidates(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}

// startControllers starts the strategy controller's two replicas, as
// k8s/overlays/cle-balanced deploys them, unless they run: the first
// controls every namespace's elections, the second stands by.
func (ps *Processes) startControllers(ctx context.Context) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.controllers != nil {
		return nil
	}
	bin, err := imagebuild.Static(ctx, "github.com/ringside/ringside/cmd/cle-balanced")
	if err != nil {
		return err
	}
	const ns = "kube-system"
	before := controllerLease(ctx, ps.c.CS, ns)
	for i := range 2 {
		id := fmt.Sprintf("cle-balanced-%d", i)
		var log io.Writer = os.Stderr // errors only
		level := "error"
		if ps.logDir != "" {
			// Its decisions beside the electors' logs (Cluster.KeepLogs):
			// which holders it named, which leaders it moved.
			f, err := os.Create(filepath.Join(ps.logDir, id+".log"))
			if err != nil {
				return fmt.Errorf("strategy controller log: %w", err)
			}
			defer f.Close() // the process has its own descriptor
			log, level = f, "debug"
		}
		cmd := exec.Command(bin, "--kubeconfig", ps.c.kubeconfig, "--id", id,
			"--namespace", ns, "--ack-wait", "500ms", "--http", "127.0.0.1:0", "--log-level", level)
		cmd.Stderr = log
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start the strategy controller: %w", err)
		}
		ps.controllers = append(ps.controllers, cmd)
		if i == 0 {
			// The standby starts once the first controls: two
			// replicas creating the controller's Lease at once leave
			// client-go's error for the loser on the run's terminal.
			if err := awaitController(ctx, ps.c.CS, ns, before); err != nil {
				return err
			}
		}
	}
	return nil
}

func (ps *Processes) close() {
	ps.mu.Lock()
	var nss []string
	for _, p := range ps.procs {
		nss = append(nss, p.ns)
	}
	ctls := ps.controllers
	ps.controllers = nil
	ps.mu.Unlock()
	for _, cmd := range ctls {
		cmd.Process.Kill()
		cmd.Wait()
	}
	for _, ns := range nss {
		ps.stop(ns)
	}
}

// tail keeps the last tailMax bytes written to it.
type tail struct {
	mu sync.Mutex
	b  []byte
}

const tailMax = 2048

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > tailMax {
		t.b = t.b[len(t.b)-tailMax:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
