package kubeexp

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"github.com/ringside/ringside/internal/imagebuild"
	"github.com/ringside/ringside/internal/kubeconfig"
	"github.com/ringside/ringside/leaderapp"
)

// splitRun is one repetition of kube-split-brain: an application's
// replicas (leaderapp beside an elector process each, every elector
// reaching the API server through its own APIProxy), writers, and the
// fault on the leader.
type splitRun struct {
	c       *kube.Cluster
	el      *kube.Processes
	ns, dir string
	t       kube.Timing
	cell    splitCell
	pods    []string
	node    map[string]string
	url     map[string]string
	sidecar map[string]string
	proxy   map[string]*kube.APIProxy
	ln      map[string]*os.File

	mu   sync.Mutex
	apps map[string]*exec.Cmd
	logs map[string][]appliedWrite
	read sync.WaitGroup // the write-log readers
}

// appPoll is how often a replica asks its sidecar who leads.
const appPoll = 50 * time.Millisecond

func newSplitRun(ctx context.Context, c *kube.Cluster, cell splitCell, replicas int, t kube.Timing) (*splitRun, error) {
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
	r := &splitRun{c: c, el: el, ns: ns, dir: dir, t: t, cell: cell, node: map[string]string{}, url: map[string]string{},
		sidecar: map[string]string{}, proxy: map[string]*kube.APIProxy{}, ln: map[string]*os.File{},
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
		p, err := kube.NewAPIProxy(server)
		if err != nil {
			r.close()
			return nil, err
		}
		r.proxy[pod] = p
		if err := kube.ProxiedKubeconfig(c.Kubeconfig(), r.kubeconfig(pod), p); err != nil {
			r.close()
			return nil, err
		}
		if r.url[pod], r.ln[pod], err = replicaListener(); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
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

func (r *splitRun) kubeconfig(pod string) string { return filepath.Join(r.dir, pod+".kubeconfig") }

// victim is the replica that leads when the fault hits: it starts first.
func (r *splitRun) victim() string { return r.pods[0] }

// start brings the replicas up: the victim's elector alone until it leads
// (with the skewed clock, if the cell has one), then the others', then
// every application, and waits until all follow the victim.
func (r *splitRun) start(ctx context.Context) error {
	elect := func(pod string) error {
		extra := []string{"--kubeconfig", r.kubeconfig(pod)}
		if pod == r.victim() && r.cell.fault == faultSkew {
			extra = append(extra, "--clock-rate", strconv.FormatFloat(r.cell.rate, 'g', -1, 64))
		}
		if err := r.el.Elect(r.ns, "app", pod, r.node[pod], r.cell.alg, "lease", r.t, extra...); err != nil {
			return err
		}
		sc, _, err := r.el.Sidecar(ctx, r.ns, pod)
		r.sidecar[pod] = sc
		return err
	}
	if err := elect(r.victim()); err != nil {
		return err
	}
	limit := 2*r.t.Lease + 30*time.Second
	if got, err := waitLeaders(ctx, r.c, r.ns, []string{"app"}, limit); err != nil || got["app"] != r.ns+"/"+r.victim() {
		return fmt.Errorf("%s did not lead alone within %s (%v, %v)", r.victim(), limit, got, err)
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
	app := &tpApp{name: "app", pods: r.pods, url: r.url}
	leader, err := app.settled(ctx, &http.Client{Timeout: time.Second}, 30*time.Second)
	if err != nil {
		return err
	}
	if leader != r.victim() {
		return fmt.Errorf("the replicas follow %s, not %s", leader, r.victim())
	}
	return nil
}

// app starts pod's application process, its write log read into r.logs.
func (r *splitRun) app(bin, pod, peers, secret string) error {
	cmd := exec.Command(bin, "--name", pod, "--listen-fd", "3", "--sidecar", r.sidecar[pod], "--peers", peers,
		"--write-work", "0", "--read-work", "0", "--poll", appPoll.String(), "--write-log", "--log-level", "error",
		"--fencing="+strconv.FormatBool(r.cell.fencing))
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
			var l struct {
				TS     int64  `json:"ts_ns"`
				Key    string `json:"key"`
				Seq    uint64 `json:"seq"`
				Term   int64  `json:"term"`
				As     string `json:"as"`
				Leader string `json:"leader"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Key != "" {
				out = append(out, appliedWrite{At: time.Unix(0, l.TS), Replica: pod, Key: l.Key, Seq: l.Seq, Term: l.Term, Leader: l.Leader, AsLeader: l.As == "leader"})
			}
		}
		r.mu.Lock()
		r.logs[pod] = out
		r.mu.Unlock()
	}()
	return nil
}

// inject holds the fault on the victim for d and lifts it.
func (r *splitRun) inject(ctx context.Context, d time.Duration) error {
	v := r.victim()
	p := r.proxy[v]
	switch r.cell.fault {
	case faultPause:
		if err := r.freeze(v, true); err != nil {
			return err
		}
		defer r.freeze(v, false)
	case faultPartition, faultSkew:
		p.Cut(true)
		defer p.Cut(false)
	case faultOverrun:
		p.Delay(r.t.Renew + r.t.Retry)
		defer p.Delay(0)
	default:
		return fmt.Errorf("fault %q", r.cell.fault)
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// freeze stops (SIGSTOP) or continues the victim's elector and
// application together: a paused process or VM.
func (r *splitRun) freeze(pod string, on bool) error {
	sig := syscall.SIGCONT
	if on {
		sig = syscall.SIGSTOP
	}
	r.mu.Lock()
	app := r.apps[pod]
	r.mu.Unlock()
	return errors.Join(r.el.Freeze(r.ns, pod, on), app.Process.Signal(sig))
}

// writers write until stop is closed: writer i owns keys w<i>-k<j>, writes
// them in turn with values w<i>-<attempt>, each to the next replica in
// turn (a follower forwards it), and returns the writes acknowledged.
func (r *splitRun) writers(n int, stop <-chan struct{}) func() []ackedWrite {
	var mu sync.Mutex
	var acked []ackedWrite
	var wg sync.WaitGroup
	hc := &http.Client{Timeout: time.Second}
	for i := range n {
		wg.Go(func() {
			for attempt := 1; ; attempt++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-k%d", i, attempt%splitKeys)
				pod := r.pods[(i+attempt)%len(r.pods)]
				req, err := http.NewRequest(http.MethodPut, r.url[pod]+"/kv/"+key, strings.NewReader(fmt.Sprintf("w%d-%d", i, attempt)))
				if err != nil {
					continue
				}
				resp, err := hc.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				seq, err := strconv.ParseUint(resp.Header.Get(leaderapp.HeaderSeq), 10, 64)
				if resp.StatusCode == http.StatusNoContent && err == nil {
					mu.Lock()
					acked = append(acked, ackedWrite{Key: key, Attempt: attempt, Seq: seq, Leader: resp.Header.Get(leaderapp.HeaderLeader)})
					mu.Unlock()
				}
			}
		})
	}
	return func() []ackedWrite {
		wg.Wait()
		return acked
	}
}

// splitKeys is how many keys each writer cycles through: few, so that a
// stale leader and its successor write the same keys.
const splitKeys = 8

// final reads every key of every writer from every replica: replica → key
// → the attempt its value carries.
func (r *splitRun) final(ctx context.Context, writers int) (map[string]map[string]int, error) {
	hc := &http.Client{Timeout: 5 * time.Second}
	out := map[string]map[string]int{}
	for _, pod := range r.pods {
		out[pod] = map[string]int{}
		for i := range writers {
			for j := range splitKeys {
				key := fmt.Sprintf("w%d-k%d", i, j)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.url[pod]+"/kv/"+key, nil)
				resp, err := hc.Do(req)
				if err != nil {
					return nil, fmt.Errorf("read %s at %s: %w", key, pod, err)
				}
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
				resp.Body.Close()
				if resp.StatusCode == http.StatusNotFound {
					continue
				}
				_, a, ok := strings.Cut(string(b), "-")
				n, err := strconv.Atoi(a)
				if resp.StatusCode != http.StatusOK || !ok || err != nil {
					return nil, fmt.Errorf("read %s at %s: %s %q", key, pod, resp.Status, b)
				}
				out[pod][key] = n
			}
		}
	}
	return out, nil
}

// stopApps ends the applications and returns their write logs, each
// replica's in the order it applied them.
func (r *splitRun) stopApps() []appliedWrite {
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
	return out
}

func (r *splitRun) close() {
	r.stopApps()
	r.c.StopNamespace(r.ns)
	for _, p := range r.proxy {
		p.Close()
	}
	for _, f := range r.ln {
		f.Close()
	}
	os.RemoveAll(r.dir)
}
