package ringnodes

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ringside/ringside/agent/runtime"
	"github.com/ringside/ringside/internal/podfault"
	"github.com/ringside/ringside/internal/proc"
)

// DefaultRunnerImage holds /ringside, /ringnode, /worker and /balancer:
// the in-cluster runner, every ring Pod (`ringside podfault` supervising
// ringnode) and lb-live's workers and balancers.
const DefaultRunnerImage = "ringside/runner:dev"

// The ring Pods' ports: ringnode's, and its fault agent's.
const (
	ringPort  = 7000
	agentPort = 7070
)

// ManagedBy labels every namespace a ringside run creates on a cluster
// (the kube experiments' too), so that what a run left behind is found.
var ManagedBy = map[string]string{"app.kubernetes.io/managed-by": "ringside"}

// OwnerLabel, on a ring's namespace, names the in-cluster runner's
// namespace (OwnerEnv in the runner's environment), so that the host
// sweeps what a runner stopped half-way left behind.
const (
	OwnerLabel = "ringside.io/owner"
	OwnerEnv   = "RINGSIDE_OWNER"
)

// KubeOptions configure a ring of ringnode Pods.
type KubeOptions struct {
	Config *rest.Config // the cluster (rest.InClusterConfig by default)
	Image  string       // default RunnerImage()
	Env    []string     // RINGNODE_* settings for every server
	Log    *slog.Logger
}

// Kube is a ring of ringnode Pods: a StatefulSet in a namespace of its
// own (stable Pod names, a headless Service for them, the cluster secret
// as a Secret, no API access), each Pod's main process the fault agent
// (package podfault) that runs ringnode when the runner says so, crashes
// it, freezes it and cuts the Pod off — the faults of the local and compose
// rings, made inside the Pod so that any cluster runs them. The runner
// reaches the Pods by their IPs: it runs inside the cluster.
type Kube struct {
	cs     kubernetes.Interface
	ns     string
	secret string
	image  string
	env    []string
	log    *slog.Logger
	hc     *http.Client
	self   netip.Addr // this runner's address as the Pods see it

	mu       sync.Mutex
	pods     []kubePod // in the order they were started
	replicas int32
}

type kubePod struct {
	name string
	ip   netip.Addr
	up   bool
}

func (p kubePod) addr() string  { return netip.AddrPortFrom(p.ip, ringPort).String() }
func (p kubePod) agent() string { return netip.AddrPortFrom(p.ip, agentPort).String() }

// InCluster is the configuration of the cluster this process runs in, with
// an error that says what to do elsewhere.
func InCluster() (*rest.Config, error) {
	rc, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("the kubernetes backend of the ring experiments reaches its Pods by their IPs, so it runs inside the cluster: "+
			"run it with `ringside cluster` (make kind-experiments on kind): %w", err)
	}
	return rc, nil
}

// StartKube brings up a ring of n ringnode Pods; every server is in the
// ring when it returns.
func StartKube(ctx context.Context, n int, o KubeOptions) (*Kube, error) {
	if n < 1 {
		return nil, fmt.Errorf("ring of %d servers", n)
	}
	if o.Config == nil {
		rc, err := InCluster()
		if err != nil {
			return nil, err
		}
		o.Config = rc
	}
	if o.Image == "" {
		o.Image = RunnerImage()
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	cs, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return nil, fmt.Errorf("kubernetes backend: %w", err)
	}
	k := &Kube{cs: cs, secret: NewSecret(), image: o.Image, env: o.Env, log: o.Log,
		hc: &http.Client{Timeout: 5 * time.Second}}
	if err := k.create(ctx, int32(n)); err != nil {
		k.Close()
		return nil, err
	}
	for range n {
		if _, err := k.startNext(ctx); err != nil {
			k.Close()
			return nil, err
		}
	}
	if err := WaitMembers(ctx, k.Addrs(), n); err != nil {
		k.Close()
		return nil, err
	}
	return k, nil
}

// Client is the ring's connection to the cluster.
func (k *Kube) Client() kubernetes.Interface { return k.cs }

// Namespace is the ring's namespace.
func (k *Kube) Namespace() string { return k.ns }

func (k *Kube) create(ctx context.Context, n int32) error {
	ns, err := CreateNamespace(ctx, k.cs, "ringside-ring")
	if err != nil {
		return fmt.Errorf("kubernetes backend: %w", err)
	}
	k.ns = ns
	if _, err := k.cs.CoreV1().Secrets(k.ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ringnode"},
		StringData: map[string]string{"secret": k.secret}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubernetes backend: secret: %w", err)
	}
	sel := map[string]string{"app.kubernetes.io/name": "ringnode"}
	if _, err := k.cs.CoreV1().Services(k.ns).Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ringnode"},
		Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Selector: sel, PublishNotReadyAddresses: true,
			Ports: []v1.ServicePort{{Name: "ring", Port: ringPort}}}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubernetes backend: service: %w", err)
	}
	if _, err := k.cs.AppsV1().StatefulSets(k.ns).Create(ctx, k.statefulSet(n, sel), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubernetes backend: statefulset: %w", err)
	}
	k.replicas = n
	return nil
}

func (k *Kube) statefulSet(n int32, sel map[string]string) *appsv1.StatefulSet {
	env := []v1.EnvVar{
		{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "RINGNODE_ADDR", Value: fmt.Sprintf("$(POD_IP):%d", ringPort)},
		{Name: "RINGNODE_DATA", Value: "/data/ring"},
		{Name: "RINGNODE_SECRET", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "ringnode"}, Key: "secret"}}},
	}
	vars := k.env
	// More servers than a node has cores: one P each, as the local ring
	// does (see StartLocal) — with Go's default every server keeps a
	// thread per core awake and the hops wait on cross-process scheduling.
	if int(n) > goruntime.NumCPU() {
		vars = proc.OneProcessor(vars)
	}
	for _, kv := range vars {
		name, val, _ := strings.Cut(kv, "=")
		env = append(env, v1.EnvVar{Name: name, Value: val})
	}
	no, grace := false, int64(2)
	root := int64(0)
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ringnode"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &n, ServiceName: "ringnode", Selector: &metav1.LabelSelector{MatchLabels: sel},
			// The runner starts the servers one by one, each joining
			// those before it (as the local ring does): the Pods
			// themselves may come up at once.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: v1.PodSpec{
					AutomountServiceAccountToken:  &no, // ringnode needs no API access
					EnableServiceLinks:            &no,
					TerminationGracePeriodSeconds: &grace,
					Containers: []v1.Container{{
						Name: "ringnode", Image: k.image, ImagePullPolicy: v1.PullIfNotPresent,
						Command: []string{"/ringside", "podfault"}, Env: env,
						Ports: []v1.ContainerPort{{Name: "ring", ContainerPort: ringPort}, {Name: "agent", ContainerPort: agentPort}},
						ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
							Path: "/healthz", Port: intstr.FromInt32(agentPort)}}, PeriodSeconds: 1},
						// The agent keeps root and NET_ADMIN for the
						// cuts' routes; ringnode runs as 65532.
						SecurityContext: &v1.SecurityContext{RunAsUser: &root, Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}}},
						VolumeMounts:    []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
					}},
					Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
}

// readyPod waits until Pod name runs with its agent ready and returns
// its IP.
func (k *Kube) readyPod(ctx context.Context, name string) (netip.Addr, error) {
	return ReadyPod(ctx, k.cs, k.ns, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
}

// ReadyPod waits up to three minutes for a ready Pod of ns that sel
// lists, not being deleted, and returns its IP; the error says where the
// last one stood (PodState).
func ReadyPod(ctx context.Context, cs kubernetes.Interface, ns string, sel metav1.ListOptions) (netip.Addr, error) {
	var ip netip.Addr
	last := "no Pod yet"
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, sel)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, p := range pods.Items {
			last = PodState(&p)
			if p.DeletionTimestamp != nil || p.Status.Phase != v1.PodRunning || !runtime.PodReady(&p) {
				continue
			}
			if ip, err = netip.ParseAddr(p.Status.PodIP); err == nil {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return ip, fmt.Errorf("kubernetes backend: pod %s (%s%s) not ready (%s): %w", ns, sel.LabelSelector, sel.FieldSelector, last, err)
	}
	return ip, nil
}

// PodState says where a Pod is: its phase and why a container waits
// (ErrImageNeverPull, CrashLoopBackOff …), for errors.
func PodState(p *v1.Pod) string {
	out := string(p.Status.Phase)
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Waiting != nil {
			out += ": " + c.State.Waiting.Reason + " " + c.State.Waiting.Message
		}
	}
	return out
}

// startNext starts the server of the next Pod of the StatefulSet, which
// must exist, joining the live ones.
func (k *Kube) startNext(ctx context.Context) (string, error) {
	k.mu.Lock()
	name := fmt.Sprintf("ringnode-%d", len(k.pods))
	k.mu.Unlock()
	ip, err := k.readyPod(ctx, name)
	if err != nil {
		return "", err
	}
	p := kubePod{name: name, ip: ip}
	if !k.self.IsValid() {
		if k.self, err = localAddrTo(ctx, p.agent()); err != nil {
			return "", err
		}
	}
	k.mu.Lock()
	k.pods = append(k.pods, p)
	k.mu.Unlock()
	return p.addr(), k.start(ctx, p.addr())
}

// localAddrTo is this process's address on the way to addr.
func localAddrTo(ctx context.Context, addr string) (netip.Addr, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("kubernetes backend: reach the fault agent at %s: %w", addr, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap(), nil
}

func (k *Kube) pod(addr string) (kubePod, int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, p := range k.pods {
		if p.addr() == addr {
			return p, i, nil
		}
	}
	return kubePod{}, 0, fmt.Errorf("%s: no such server", addr)
}

// agentDo sends a request to addr's fault agent.
func (k *Kube) agentDo(ctx context.Context, p kubePod, path string, q url.Values) error {
	u := "http://" + p.agent() + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set(podfault.HeaderSecret, k.secret)
	resp, err := k.hc.Do(req)
	if err != nil {
		return fmt.Errorf("fault agent of %s: %w", p.name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fault agent of %s: %s %s: %s: %s", p.name, req.Method, path, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// start runs addr's server, joining the live servers, and waits until it
// answers.
func (k *Kube) start(ctx context.Context, addr string) error {
	p, i, err := k.pod(addr)
	if err != nil {
		return err
	}
	live := k.Addrs()
	if err := k.agentDo(ctx, p, "/start", url.Values{"join": {strings.Join(live, ",")}}); err != nil {
		return err
	}
	k.mu.Lock()
	k.pods[i].up = true
	k.mu.Unlock()
	if err := WaitHealthy(ctx, addr, nil); err != nil {
		return fmt.Errorf("ringnode in %s/%s: %w; its log ends:\n%s", k.ns, p.name, err, k.logTail(ctx, p.name, 20))
	}
	return nil
}

func (k *Kube) logTail(ctx context.Context, pod string, lines int64) string {
	raw, err := k.cs.CoreV1().Pods(k.ns).GetLogs(pod, &v1.PodLogOptions{TailLines: &lines}).DoRaw(context.WithoutCancel(ctx))
	if err != nil {
		return err.Error()
	}
	return string(raw)
}

// Addrs lists the servers that are up, in the order they were started.
func (k *Kube) Addrs() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, p := range k.pods {
		if p.up {
			out = append(out, p.addr())
		}
	}
	return out
}

// Down lists the servers that were killed and not restarted.
func (k *Kube) Down() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, p := range k.pods {
		if !p.up {
			out = append(out, p.addr())
		}
	}
	return out
}

// Logs returns the log of every Pod of the ring (agent and ringnode).
func (k *Kube) Logs(ctx context.Context) (string, error) {
	var b strings.Builder
	k.mu.Lock()
	pods := slices.Clone(k.pods)
	k.mu.Unlock()
	for _, p := range pods {
		raw, err := k.cs.CoreV1().Pods(k.ns).GetLogs(p.name, &v1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			fmt.Fprintf(&b, "== %s: %v\n", p.name, err)
			continue
		}
		fmt.Fprintf(&b, "== %s (%s)\n%s\n", p.name, p.addr(), raw)
	}
	return b.String(), nil
}

// Close deletes the ring's namespace and everything in it; Kubernetes
// finishes the deletion on its own.
func (k *Kube) Close() error {
	if k.ns == "" {
		return nil
	}
	if err := DeleteNamespace(context.Background(), k.cs, k.ns); err != nil {
		return fmt.Errorf("kubernetes backend: %w", err)
	}
	return nil
}
