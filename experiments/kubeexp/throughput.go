package kubeexp

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/backend/kube"
	"github.com/ringside/ringside/internal/cgroup"
	"github.com/ringside/ringside/internal/imagebuild"
	"github.com/ringside/ringside/leaderapp"
)

// The throughput experiments (seed 000 Fig. 6, 12, 13) run the
// leader-based application (cmd/leaderapp) beside real electors on three
// "nodes": cgroups with a CPU limit each, as a loaded Kubernetes node's
// allocatable CPU bounds its pods. Each replica's application and elector
// processes run in the cgroup of the node its Pod is bound to.

// tpFlags are the settings both throughput experiments take.
type tpFlags struct {
	clients  experiments.IntList
	duration time.Duration
	// quickPoint is a load point's length in the quick profile.
	quickPoint time.Duration
	nodeCPUs   float64
	writeWork  int
	readWork   int
	k          kubeFlags
}

// define adds the flags; a quick load point lasts quickPoint.
func (f *tpFlags) define(fs *flag.FlagSet, quickPoint time.Duration) {
	f.quickPoint = quickPoint
	fs.Var(&f.clients, "clients", "concurrent closed-loop clients per load point (default: 1,16 quick; 1,2,4,8,16 paper, as the paper ran)")
	fs.DurationVar(&f.duration, "duration", 0, fmt.Sprintf("length of a load point (default: %s quick, 60 s paper, as the paper ran)", quickPoint))
	fs.Float64Var(&f.nodeCPUs, "node-cpus", 0.5, "CPU limit of each of the three worker nodes (a cgroup)")
	fs.IntVar(&f.writeWork, "write-work", 3000, "SHA-256 rounds a write costs the leader")
	fs.IntVar(&f.readWork, "read-work", 300, "SHA-256 rounds a read costs (a tenth of a write)")
	f.k.define(fs, false)
}

// clientCounts is the load points' client counts in profile: in the
// quick profile the two seed 000's Fig. 13 quotes.
func (f *tpFlags) clientCounts(profile string) experiments.IntList {
	return f.points(profile, experiments.IntList{1, 16})
}

// points is the load points in profile, with quick as the quick
// profile's.
func (f *tpFlags) points(profile string, quick experiments.IntList) experiments.IntList {
	return experiments.Points(f.clients, profile, quick, experiments.IntList{1, 2, 4, 8, 16})
}

// pointDuration is the length of a load point in profile.
func (f *tpFlags) pointDuration(profile string) time.Duration {
	switch {
	case f.duration > 0:
		return f.duration
	case profile == experiments.ProfilePaper:
		return time.Minute
	}
	return f.quickPoint
}

// tpTiming is the lease configuration of the throughput runs: a leader
// change is not what they measure.
var tpTiming = kube.Timing{Lease: 4 * time.Second, Renew: 3 * time.Second, Retry: 500 * time.Millisecond}

// tpRun is one namespace of applications on the CPU-limited nodes.
type tpRun struct {
	c      *kube.Cluster
	el     *kube.Processes
	ns     string
	lock   string
	bin    string
	secret string
	nodes  map[string]*cgroup.Group
	mu     sync.Mutex
	procs  []*exec.Cmd
}

func newTPRun(ctx context.Context, c *kube.Cluster, prefix, lock string, nodeCPUs float64) (*tpRun, error) {
	el, err := c.Processes()
	if err != nil {
		return nil, err
	}
	bin, err := imagebuild.Static(ctx, "github.com/ringside/ringside/cmd/leaderapp")
	if err != nil {
		return nil, err
	}
	ns, err := c.Namespace(ctx, prefix)
	if err != nil {
		return nil, err
	}
	sec := make([]byte, 16)
	crand.Read(sec)
	r := &tpRun{c: c, el: el, ns: ns, lock: lock, bin: bin, secret: hex.EncodeToString(sec), nodes: map[string]*cgroup.Group{}}
	for _, w := range c.WorkerNodes {
		g, err := cgroup.New("ringside/"+ns+"/"+w, nodeCPUs)
		if err != nil {
			r.close()
			if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
				return nil, fmt.Errorf("%w: the nodes are cgroups, which need root: %v", experiments.ErrUnavailable, err)
			}
			return nil, fmt.Errorf("node %s: %w", w, err)
		}
		r.nodes[w] = g
	}
	return r, nil
}

// close stops every process of the run and removes its nodes.
func (r *tpRun) close() {
	r.mu.Lock()
	procs := r.procs
	r.procs = nil
	r.mu.Unlock()
	for _, p := range procs {
		p.Process.Signal(syscall.SIGKILL)
		p.Wait()
	}
	r.c.StopNamespace(r.ns)
	for _, g := range r.nodes {
		g.Remove()
	}
	cgroup.RemoveEmpty("ringside/" + r.ns)
}

// tpApp is one application: its replicas' pods, nodes and URLs.
type tpApp struct {
	name     string
	pods     []string
	node     map[string]string // pod → node
	url      map[string]string // pod → application URL
	sidecars []string
	ln       map[string]*os.File // pod → its listening socket, until its process has it
}

func (a *tpApp) closeListeners() {
	for _, f := range a.ln {
		f.Close()
	}
}

// start deploys an application of replicas over the nodes from offset.
// With first set (forced placement), that pod's elector starts alone and
// leads before the others start; otherwise all start at once and alg
// decides.
func (r *tpRun) start(ctx context.Context, name string, replicas, offset int, alg string, first string, writeWork, readWork int) (*tpApp, error) {
	pods, err := r.c.Pods(ctx, r.ns, kube.App{Name: name, Replicas: replicas, Nodes: r.c.WorkerNodes}, offset)
	if err != nil {
		return nil, err
	}
	a := &tpApp{name: name, node: map[string]string{}, url: map[string]string{}, ln: map[string]*os.File{}}
	defer a.closeListeners()
	for _, pn := range pods {
		a.pods = append(a.pods, pn[0])
		a.node[pn[0]] = pn[1]
		if a.url[pn[0]], a.ln[pn[0]], err = replicaListener(); err != nil {
			return nil, err
		}
	}
	elect := func(pod string) error {
		if err := r.el.Elect(r.ns, name, pod, a.node[pod], alg, r.lock, tpTiming); err != nil {
			return err
		}
		sidecar, pid, err := r.el.Sidecar(ctx, r.ns, pod)
		if err != nil {
			return err
		}
		r.mu.Lock()
		a.sidecars = append(a.sidecars, sidecar)
		r.mu.Unlock()
		if err := r.nodes[a.node[pod]].Add(pid); err != nil {
			return err
		}
		return r.app(a, pod, sidecar, writeWork, readWork)
	}
	rest := a.pods
	if first != "" {
		if err := elect(first); err != nil {
			return nil, err
		}
		if got, err := waitLeaders(ctx, r.c, r.ns, []string{name}, 30*time.Second); err != nil || got[name] != r.ns+"/"+first {
			return nil, fmt.Errorf("%s: %s did not lead alone (%v, %v)", name, first, got, err)
		}
		rest = slices.DeleteFunc(slices.Clone(rest), func(p string) bool { return p == first })
	}
	// The rest start side by side, as a Deployment's replicas do.
	errs := make([]error, len(rest))
	var wg sync.WaitGroup
	for i, pod := range rest {
		wg.Go(func() { errs[i] = elect(pod) })
	}
	wg.Wait()
	return a, errors.Join(errs...)
}

// replicaListener opens a replica's listening socket before any replica
// starts (the peers need each other's URLs), as a file to hand to its
// process: no other process can take the port in between.
func replicaListener() (url string, f *os.File, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	defer ln.Close()
	f, err = ln.(*net.TCPListener).File()
	return "http://" + ln.Addr().String(), f, err
}

// app starts the application process of pod in its node's cgroup.
func (r *tpRun) app(a *tpApp, pod, sidecar string, writeWork, readWork int) error {
	var peers []string
	for _, p := range a.pods {
		peers = append(peers, p+"="+a.url[p])
	}
	// --stale: a replica on a saturated node (the concentrated
	// placement's, by design) can wait on its sidecar's answer for several
	// CFS periods, and the default 5 × poll (250 ms) would then make it
	// leaderless and fail writes for the machine's load, not the
	// placement's (a loaded CI run counted 2 failed writes in a 300 ms
	// point). Writes stay safe with a longer one: every follower checks
	// the sender of an apply.
	cmd := exec.Command(r.bin, "--name", pod, "--listen-fd", "3", "--sidecar", sidecar, "--peers", strings.Join(peers, ","),
		"--write-work", fmt.Sprint(writeWork), "--read-work", fmt.Sprint(readWork),
		"--poll", "50ms", "--stale", (2 * tpTiming.Retry).String(), "--log-level", "warn")
	cmd.Env = append(os.Environ(), "APP_SECRET="+r.secret) // never on a command line
	cmd.ExtraFiles = []*os.File{a.ln[pod]}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", pod, err)
	}
	r.mu.Lock()
	r.procs = append(r.procs, cmd)
	r.mu.Unlock()
	return r.nodes[a.node[pod]].Add(cmd.Process.Pid)
}

// settled waits until every replica of a answers /role and all name the
// same leader, and returns it.
func (a *tpApp) settled(ctx context.Context, hc *http.Client, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	var last string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		leaders := map[string]bool{}
		for _, p := range a.pods {
			var st struct{ Role, Leader string }
			if err := getJSON(ctx, hc, a.url[p]+"/role", &st); err != nil || st.Leader == "" {
				leaders[""] = true
				last = fmt.Sprintf("%s: %v %+v", p, err, st)
				break
			}
			leaders[st.Leader] = true
		}
		if len(leaders) == 1 && !leaders[""] {
			for l := range leaders {
				return l, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("%s: replicas do not agree on a leader within %s (%s)", a.name, limit, last)
}

// steady waits, before a load point, until every replica of each of apps
// again names that application's leader in leaders. The point before can
// leave a saturated node's replicas without a fresh answer from their
// sidecar for a moment — leaderless, by design (--stale) — and a point
// started in that lapse measures the point before it, not its own load: a
// loaded make test had both writes of a 300-ms point fail with 503 right
// after the read point. A leader that moved is errNotAsForced: a leader
// change is not what the throughput experiments measure (tpTiming), and
// the rows would name the wrong leader.
func steady(ctx context.Context, hc *http.Client, apps []*tpApp, leaders []string) error {
	for i, a := range apps {
		l, err := a.settled(ctx, hc, 30*time.Second)
		if err != nil {
			return err
		}
		if l != leaders[i] {
			return fmt.Errorf("%w: %s leads %s, not %s as placed", errNotAsForced, l, a.name, leaders[i])
		}
	}
	return nil
}

func getJSON(ctx context.Context, hc *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(v)
}

// smartClient is the paper's smart write client over a's replicas.
func (a *tpApp) smartClient(hc *http.Client) *leaderapp.SmartClient {
	return &leaderapp.SmartClient{Sidecars: a.sidecars, Peers: a.url, HC: hc}
}
