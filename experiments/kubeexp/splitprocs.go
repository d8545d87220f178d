package kubeexp

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ringside/ringside/experiments/backend/kube"
	"github.com/ringside/ringside/internal/faultrelay"
	"github.com/ringside/ringside/internal/imagebuild"
	"github.com/ringside/ringside/internal/kubeconfig"
)

// splitProcs runs kube-split-brain's replicas on the process backend:
// leaderapp processes beside elector processes, every elector reaching
// the API server through a fault relay of its own on the host.
type splitProcs struct {
	c       *kube.Cluster
	el      *kube.Processes
	ns, dir string
	t       kube.Timing
	cell    splitCell
	pods    []string
	node    map[string]string
	url     map[string]string
	sidecar map[string]string
	proxy   map[string]*faultrelay.Relay
	ln      map[string]*os.File

	mu   sync.Mutex
	apps map[string]*exec.Cmd
	logs map[string][]appliedWrite
	read sync.WaitGroup // the write-log readers
}

func newSplitProcs(ctx context.Context, c *kube.Cluster, cell splitCell, replicas int, t kube.Timing) (*splitRun, error) {
	el, err := c.Processes()
	if err != nil {
		return nil, err
	}
	ns, err := c.Namespace(ctx, "split")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ringside-split-")
	if err != nil {
		return nil, err
	}
	r := &splitProcs{c: c, el: el, ns: ns, dir: dir, t: t, cell: cell, node: map[string]string{}, url: map[string]string{},
		sidecar: map[string]string{}, proxy: map[string]*faultrelay.Relay{}, ln: map[string]*os.File{},
		apps: map[string]*exec.Cmd{}, logs: map[string][]appliedWrite{}}
	pods, err := c.Pods(ctx, ns, kube.App{Name: "app", Replicas: replicas, Nodes: c.WorkerNodes}, 0)
	if err != nil {
		r.close()
		return nil, err
	}
	server, err := apiServer(c.Kubeconfig())
	if err != nil {
		r.close()
		return nil, err
	}
	for _, pn := range pods {
		pod := pn[0]
		r.pods = append(r.pods, pod)
		r.node[pod] = pn[1]
		p, err := faultrelay.New("127.0.0.1:0", server)
		if err != nil {
			r.close()
			return nil, err
		}
		r.proxy[pod] = p
		if err := kube.ProxiedKubeconfig(c.Kubeconfig(), r.kubeconfig(pod), p.Addr()); err != nil {
			r.close()
			return nil, err
		}
		if r.url[pod], r.ln[pod], err = replicaListener(); err != nil {
			r.close()
			return nil, err
		}
	}
	return &splitRun{cell: cell, t: t, pods: r.pods, url: r.url, hc: &http.Client{}, reps: r}, nil
}

// apiServer is the host:port of the API server a kubeconfig names.
func apiServer(path string) (string, error) {
	rc, err := kubeconfig.Load(path)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(rc.Host)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("kubeconfig %s: server %q: %v", path, rc.Host, err)
	}
	return u.Host, nil
}

func (r *splitProcs) kubeconfig(pod string) string { return filepath.Join(r.dir, pod+".kubeconfig") }

func (r *splitProcs) start(ctx context.Context) error {
	victim := r.pods[0]
	elect := func(pod string) error {
		extra := []string{"--kubeconfig", r.kubeconfig(pod)}
		if pod == victim && r.cell.fault == faultSkew {
			extra = append(extra, "--clock-rate", strconv.FormatFloat(r.cell.rate, 'g', -1, 64))
		}
		if err := r.el.Elect(r.ns, "app", pod, r.node[pod], r.cell.alg, "lease", r.t, extra...); err != nil {
			return err
		}
		sc, _, err := r.el.Sidecar(ctx, r.ns, pod)
		r.sidecar[pod] = sc
		return err
	}
	if err := elect(victim); err != nil {
		return err
	}
	if err := waitLeader(ctx, r.c, r.ns, victim, r.t); err != nil {
		return err
	}
	for _, pod := range r.pods[1:] {
		if err := elect(pod); err != nil {
			return err
		}
	}
	bin, err := imagebuild.Static(ctx, "github.com/ringside/ringside/cmd/leaderapp")
	if err != nil {
		return err
	}
	sec := make([]byte, 16)
	crand.Read(sec)
	var peers []string
	for _, p := range r.pods {
		peers = append(peers, p+"="+r.url[p])
	}
	for _, pod := range r.pods {
		if err := r.app(bin, pod, strings.Join(peers, ","), hex.EncodeToString(sec)); err != nil {
			return err
		}
	}
	return followVictim(ctx, r.pods, r.url, &http.Client{Timeout: time.Second})
}

// waitLeader waits until victim alone leads ns's application.
func waitLeader(ctx context.Context, c *kube.Cluster, ns, victim string, t kube.Timing) error {
	limit := 2*t.Lease + 30*time.Second
	if got, err := waitLeaders(ctx, c, ns, []string{"app"}, limit); err != nil || got["app"] != ns+"/"+victim {
		return fmt.Errorf("%s did not lead alone within %s (%v, %v)", victim, limit, got, err)
	}
	return nil
}

// errLeadMoved: the victim lost the lead before its fault — on a machine
// too busy for it to renew within the renew deadline (CI's, with a kind
// cluster and a compile beside it), as the algorithm allows — so the
// repetition would not measure the fault; it is set up again.
var errLeadMoved = errors.New("the victim lost the lead before the fault")

// followVictim waits until every replica follows pods[0].
func followVictim(ctx context.Context, pods []string, url map[string]string, hc *http.Client) error {
	app := &tpApp{name: "app", pods: pods, url: url}
	leader, err := app.settled(ctx, hc, 30*time.Second)
	if err != nil {
		return err
	}
	if leader != pods[0] {
		return fmt.Errorf("%w: the replicas follow %s, not %s", errLeadMoved, leader, pods[0])
	}
	return nil
}

// app starts pod's application process, its write log read into r.logs.
func (r *splitProcs) app(bin, pod, peers, secret string) error {
	args := append([]string{"--name", pod, "--listen-fd", "3", "--peers", peers}, appArgs(r.sidecar[pod], r.cell.fencing)...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "APP_SECRET="+secret) // never on a command line
	cmd.ExtraFiles = []*os.File{r.ln[pod]}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", pod, err)
	}
	r.mu.Lock()
	r.apps[pod] = cmd
	r.mu.Unlock()
	r.read.Add(1)
	go func() {
		defer r.read.Done()
		var out []appliedWrite
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if w, ok := parseApplied(sc.Bytes(), pod); ok {
				out = append(out, w)
			}
		}
		r.mu.Lock()
		r.logs[pod] = out
		r.mu.Unlock()
	}()
	return nil
}

// freeze stops (SIGSTOP) or continues pod's elector and application
// together.
func (r *splitProcs) freeze(_ context.Context, pod string, on bool) error {
	sig := syscall.SIGCONT
	if on {
		sig = syscall.SIGSTOP
	}
	r.mu.Lock()
	app := r.apps[pod]
	r.mu.Unlock()
	return errors.Join(r.el.Freeze(r.ns, pod, on), app.Process.Signal(sig))
}

func (r *splitProcs) cut(_ context.Context, pod string, on bool) error {
	r.proxy[pod].Cut(on)
	return nil
}

func (r *splitProcs) overrun(_ context.Context, pod string, on bool) error {
	d := time.Duration(0)
	if on {
		d = r.t.Renew + r.t.Retry
	}
	r.proxy[pod].Delay(d)
	return nil
}

func (r *splitProcs) crashed() error { return r.c.Crashed(r.ns) }

func (r *splitProcs) stopApps(context.Context) ([]appliedWrite, error) {
	r.mu.Lock()
	apps := r.apps
	r.apps = map[string]*exec.Cmd{}
	r.mu.Unlock()
	for _, cmd := range apps {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
	r.read.Wait()
	var out []appliedWrite
	for _, pod := range r.pods {
		out = append(out, r.logs[pod]...)
	}
	return out, nil
}

func (r *splitProcs) close() {
	r.stopApps(context.Background())
	r.c.StopNamespace(r.ns)
	for _, p := range r.proxy {
		p.Close()
	}
	for _, f := range r.ln {
		f.Close()
	}
	os.RemoveAll(r.dir)
}
