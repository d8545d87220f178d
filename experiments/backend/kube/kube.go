// Package kube holds the backends of the kube experiments. The kube
// backend runs elector processes, one per application replica, against a
// Kubernetes API server — the local control plane by default — and
// collects their leadership events. Pods are created as API objects bound
// to nodes, spread the way the default scheduler spreads replicas; without
// a kubelet they stay Pending, and the electors run as local processes so
// that SIGKILL and SIGTERM are real (procs.go). The kubernetes backend (pods.go)
// runs the electors as the sidecars of real Pods on a cluster with
// kubelets. Both are electors behind one Cluster.
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ringside/ringside/bld"
	"github.com/ringside/ringside/experiments/backend/kube/controlplane"
	"github.com/ringside/ringside/experiments/backend/ringnodes"
	"github.com/ringside/ringside/internal/imagebuild"
)

// LocalWorkers are the worker nodes created on a local control plane,
// three as in the BLD paper.
var LocalWorkers = []string{"worker-1", "worker-2", "worker-3"}

// Event is one line an elector printed. ID, Election and Leader are
// "namespace/name".
type Event struct {
	TS       time.Time
	Event    string // launched, campaign, started, stopped, leader, killed
	ID       string
	Election string
	// The leader: the new one for "leader" and "started", the one a
	// "stopped" handed over to (none where it lost or released the lease).
	Leader string
}

// Timing is the lease configuration of every elector.
type Timing struct {
	Lease, Renew, Retry time.Duration
}

// Cluster is a connection to an API server plus the electors it runs.
type Cluster struct {
	cp         *controlplane.ControlPlane
	dir        string
	kubeconfig string
	CS         *kubernetes.Clientset
	// WorkerNodes are the schedulable nodes the Pods are spread over:
	// LocalWorkers, or those of the cluster behind the kubeconfig (kind's
	// are named after the cluster).
	WorkerNodes []string
	el          electors // processes, or the kubernetes backend's Pods

	mu     sync.Mutex
	events []Event
}

// electors is what a backend does with the candidates: run them, lose a
// leader, report the ones that died on their own, and stop them.
type electors interface {
	// deploy starts the candidates of apps in ns and returns "ns/pod" →
	// node; offset is the first node of the round-robin, where the
	// backend places replicas itself.
	deploy(ctx context.Context, ns string, apps []App, offset int, alg, lock string, t Timing) (map[string]string, error)
	// signal loses the elector of pod with sig and returns when it was
	// sent; it waits until the elector is gone.
	signal(ctx context.Context, ns, pod string, sig syscall.Signal) (time.Time, error)
	crashed(ns string) error
	// keepLogs makes every elector started from now on log at debug
	// level to dir/<namespace>_<pod>.log.
	keepLogs(dir string)
	stop(ns string)
	close()
}

// KindKubeconfig is where `make kind-up` writes the kind cluster's
// kubeconfig: the cluster the kubernetes backend and `ringside cluster` use when
// none is named and it exists.
const KindKubeconfig = ".kube/kind.kubeconfig"

// Backends: "kube" runs the electors as local processes against the API
// server (Processes), "kubernetes" as the sidecars of real Pods on any
// cluster with kubelets (podRunner) — kind's after make kind-up. It was
// called "kind", which --backend still accepts.
const (
	BackendKube = "kube"
	BackendPods = "kubernetes"
)

// Start connects to kubeconfig, or starts a local control plane when it
// is empty and creates the worker nodes there. The kubernetes backend needs the
// kubeconfig of a cluster with kubelets and ringside/elector:dev loaded
// (make kind-up kind-deploy).
func Start(ctx context.Context, kubeconfig, backend string) (*Cluster, error) {
	c := &Cluster{kubeconfig: kubeconfig}
	switch backend {
	case BackendKube:
		bin, err := imagebuild.Static(ctx, "github.com/ringside/ringside/cmd/elector")
		if err != nil {
			return nil, err
		}
		c.el = &Processes{c: c, bin: bin, procs: map[string]*proc{}}
	case BackendPods:
		if kubeconfig == "" {
			return nil, errors.New("the kubernetes backend needs --kubeconfig (make kind-up writes .kube/kind.kubeconfig)")
		}
	default:
		return nil, fmt.Errorf("backend %q: want %s or %s", backend, BackendKube, BackendPods)
	}
	var err error
	if kubeconfig == "" {
		c.dir, err = os.MkdirTemp("", "ringside-kube-")
		if err != nil {
			return nil, err
		}
		c.cp, err = controlplane.Start(ctx, c.dir)
		if err != nil {
			return nil, err
		}
		c.kubeconfig = c.cp.Kubeconfig
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		c.Close()
		return nil, err
	}
	rc.QPS, rc.Burst = 500, 1000
	if c.CS, err = kubernetes.NewForConfig(rc); err != nil {
		c.Close()
		return nil, err
	}
	if backend == BackendPods {
		if c.el, err = newPodRunner(c, rc); err != nil {
			return nil, err
		}
	}
	if c.cp != nil {
		for _, n := range LocalWorkers {
			if _, err := c.CS.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
				c.Close()
				return nil, fmt.Errorf("create node %s: %w", n, err)
			}
		}
	}
	if c.WorkerNodes, err = workers(ctx, c.CS); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// network names the cluster's pod network as its DaemonSets in
// kube-system show it — the CNI plugin's (kindnet, calico-node, cilium,
// ringside's podnet on kind here …) beside kube-proxy — or nothing where no
// kubelet runs them (the local control plane).
func network(ctx context.Context, cs kubernetes.Interface) []string {
	list, err := cs.AppsV1().DaemonSets("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{"unknown: " + err.Error()}
	}
	var out []string
	for _, d := range list.Items {
		out = append(out, d.Name)
	}
	slices.Sort(out)
	return out
}

// Describe is what meta.json records of a cluster: its version, its
// nodes and its pod network.
func Describe(ctx context.Context, cs kubernetes.Interface) map[string]any {
	out := map[string]any{"kube_system_daemonsets": network(ctx, cs)}
	if v, err := cs.Discovery().ServerVersion(); err == nil {
		out["version"] = v.GitVersion
	}
	if list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		out["nodes"] = len(list.Items)
		out["workers"] = len(bld.Workers(list.Items))
	}
	return out
}

// Kubeconfig is the path of the cluster's kubeconfig.
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// workers lists the nodes the BLD candidates count, sorted.
func workers(ctx context.Context, cs kubernetes.Interface) ([]string, error) {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list worker nodes: %w", err)
	}
	out := bld.Workers(list.Items)
	if len(out) == 0 {
		return nil, errors.New("the cluster has no schedulable worker node")
	}
	slices.Sort(out)
	return out, nil
}

// managedBy labels every namespace a run creates, so that what a run
// leaves behind can be found (Leftovers) — the ring's and the in-cluster
// runner's too.
var managedBy = ringnodes.ManagedBy

// NamespaceLabel marks the cluster-scoped objects made for a namespace, so
// that Leftovers finds them.
const NamespaceLabel = "ringside.io/namespace"

// Namespace creates a fresh namespace (they never finish deleting without
// a controller manager, so every repetition gets its own).
func (c *Cluster) Namespace(ctx context.Context, prefix string) (string, error) {
	ns, err := c.CS.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: managedBy}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return ns.Name, nil
}

// Leftovers names what runs left on a cluster: namespaces they created
// that are not being deleted, and the cluster-wide bindings made for
// their namespaces. A run removes both at its end, or when cancelled.
func Leftovers(ctx context.Context, cs kubernetes.Interface) ([]string, error) {
	var out []string
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(managedBy).String()})
	if err != nil {
		return nil, err
	}
	for _, n := range nss.Items {
		if n.DeletionTimestamp == nil {
			out = append(out, "namespace "+n.Name)
		}
	}
	crbs, err := cs.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{LabelSelector: NamespaceLabel})
	if err != nil {
		return nil, err
	}
	for _, b := range crbs.Items {
		out = append(out, "clusterrolebinding "+b.Name)
	}
	return out, nil
}

// App is one application to deploy.
type App struct {
	Name     string
	Replicas int
	Nodes    []string // nodes its replicas are spread over, in order
	// First numbers the first replica's Pod (Name-First): more
	// candidates of a running application (a node joining) get new names.
	First int
	// Annotations go on every Pod of the application.
	Annotations map[string]string
	// CampaignAt, if set, holds every candidate's campaign until then
	// (elector --campaign-at): they start first and campaign together.
	CampaignAt time.Time
}

// campaignAt is the elector's --campaign-at value for app ("": none).
func (app App) campaignAt() string {
	if app.CampaignAt.IsZero() {
		return ""
	}
	return app.CampaignAt.UTC().Format(time.RFC3339Nano)
}

// Pods creates the application's Pods bound to nodes round-robin, starting
// at offset (so that successive applications fill nodes evenly, like the
// scheduler's spreading), and returns pod name → node.
func (c *Cluster) Pods(ctx context.Context, ns string, app App, offset int) ([][2]string, error) {
	var out [][2]string
	for i := range app.Replicas {
		name := fmt.Sprintf("%s-%d", app.Name, app.First+i)
		node := app.Nodes[(offset+i)%len(app.Nodes)]
		_, err := c.CS.CoreV1().Pods(ns).Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{bld.ElectionLabel: app.Name}, Annotations: app.Annotations},
			Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "app", Image: "ringside/app"}, {Name: "elector", Image: "ringside/elector"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create pod %s: %w", name, err)
		}
		out = append(out, [2]string{name, node})
	}
	return out, nil
}

// eventLine is a line the elector prints with --events.
type eventLine struct {
	TS                                int64 `json:"ts_ns"`
	Event, ID, Election, Leader, Addr string
}

// parseEvent reads an elector's event line in namespace ns; other lines
// (logs, the serving announcement) are not events.
func parseEvent(line []byte, ns string) (Event, bool) {
	var raw eventLine
	if json.Unmarshal(line, &raw) != nil || raw.Event == "" || raw.Event == "serving" {
		return Event{}, false
	}
	e := Event{TS: time.Unix(0, raw.TS), Event: raw.Event, ID: ns + "/" + raw.ID, Election: ns + "/" + raw.Election}
	if raw.Leader != "" {
		e.Leader = ns + "/" + raw.Leader
	}
	return e, true
}

// servingAt reads the elector's announcement of its sidecar address.
func servingAt(line []byte) (string, bool) {
	var raw eventLine
	if json.Unmarshal(line, &raw) != nil || raw.Event != "serving" {
		return "", false
	}
	return raw.Addr, true
}

func (c *Cluster) record(e Event) {
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
}

// Events returns the events so far of elections in namespace ns.
func (c *Cluster) Events(ns string) []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Event
	for _, e := range c.events {
		if len(e.Election) > len(ns) && e.Election[:len(ns)+1] == ns+"/" {
			out = append(out, e)
		}
	}
	return out
}

// Leader returns the current leader of app in ns according to the
// events: the last started that has not stopped or been killed.
func (c *Cluster) Leader(ns, app string) (id string, since time.Time) {
	leading := map[string]time.Time{}
	for _, e := range c.Events(ns) {
		if e.Election != ns+"/"+app {
			continue
		}
		switch e.Event {
		case "started":
			leading[e.ID] = e.TS
		case "stopped", "killed":
			delete(leading, e.ID)
		}
	}
	for l, t := range leading {
		if id == "" || t.After(since) {
			id, since = l, t
		}
	}
	return id, since
}

// KeepLogs makes every elector started from now on log at debug level to
// dir/<namespace>_<pod>.log: each acquisition attempt's read, gate and
// write times, refusals and validations — where an election's time went.
// On the kubernetes backend the file is the elector container's log, read
// as the backend reads its events (both streams, as kubectl logs shows).
func (c *Cluster) KeepLogs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("elector logs: %w", err)
	}
	c.el.keepLogs(dir)
	return nil
}

// Processes is the process backend's electors, for the experiments that
// measure the elector processes themselves (their CPU, their sidecar).
func (c *Cluster) Processes() (*Processes, error) {
	p, ok := c.el.(*Processes)
	if !ok {
		return nil, errors.New("the kubernetes backend has no elector process to measure: use the kube backend")
	}
	return p, nil
}

// Deploy starts the candidates of apps in ns, each replica an elector
// campaigning with alg on lock, and returns "ns/pod" → node. The process
// backend creates the Pods bound to nodes round-robin from offset and
// starts one elector process per replica, side by side as a Deployment's
// replicas start; the kubernetes backend creates a Deployment per application
// (the overlay's, with the sidecar) and lets the scheduler spread it.
func (c *Cluster) Deploy(ctx context.Context, ns string, apps []App, offset int, alg, lock string, t Timing) (map[string]string, error) {
	return c.el.deploy(ctx, ns, apps, offset, alg, lock, t)
}

// Crashed returns an error naming every elector of ns that died without
// being signalled (a process that exited, a Pod's container that
// restarted), with its last words where known.
func (c *Cluster) Crashed(ns string) error { return c.el.crashed(ns) }

// Signal loses the elector of pod: a process gets sig; on kind the Pod is
// deleted, with no grace period for SIGKILL and the manifest's (the
// kubelet sends SIGTERM) for SIGTERM. A SIGKILL is recorded as a "killed"
// event, since the elector cannot say. It returns when sig was sent.
func (c *Cluster) Signal(ctx context.Context, ns, pod string, sig syscall.Signal) (time.Time, error) {
	return c.el.signal(ctx, ns, pod, sig)
}

// StopNamespace stops every elector in ns (on kind: deletes ns).
func (c *Cluster) StopNamespace(ns string) { c.el.stop(ns) }

// Close stops every elector and a local control plane.
func (c *Cluster) Close() {
	if c.el != nil {
		c.el.close()
	}
	if c.cp != nil {
		c.cp.Stop()
	}
	if c.dir != "" {
		os.RemoveAll(c.dir)
	}
}

// Overlaps counts the moments two electors of one election both believed
// they led, from the events: a "started" while another's leadership had
// not yet ended by "stopped" or "killed".
func Overlaps(events []Event) int {
	leading := map[string]map[string]bool{}
	n := 0
	for _, e := range SortByTime(events) {
		if leading[e.Election] == nil {
			leading[e.Election] = map[string]bool{}
		}
		switch e.Event {
		case "started":
			if len(leading[e.Election]) > 0 {
				n++
			}
			leading[e.Election][e.ID] = true
		case "stopped", "killed":
			delete(leading[e.Election], e.ID)
		}
	}
	return n
}

// SortByTime returns the events in time order (electors on many
// processes or Pods report out of order).
func SortByTime(events []Event) []Event {
	out := slices.Clone(events)
	slices.SortStableFunc(out, func(a, b Event) int { return a.TS.Compare(b.TS) })
	return out
}
