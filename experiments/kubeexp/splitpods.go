package kubeexp

import (
	"bufio"
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/ringside/ringside/experiments/backend/kube"
	"github.com/ringside/ringside/internal/kubeconfig"
)

// splitPods runs kube-split-brain's replicas as Pods on the kubernetes backend:
// each Pod holds the overlay's elector, leaderapp ("app") and a fault
// relay ("faultproxy", cmd/faultproxy, a native sidecar) through which
// the elector reaches the API server, all from the elector image. The replicas find each
// other through a headless Service; the writers reach them through the
// API server's Pod proxy, which works from wherever the kubeconfig does.
// Faults are made on the node: pause freezes the elector and app
// containers (cgroup freezer), partition rejects in the Pod's network
// namespace what the relay sends to the API server, overrun signals the
// relay to hold the elector's bytes.
type splitPods struct {
	c    *kube.Cluster
	ns   string
	t    kube.Timing
	cell splitCell
	pods []string
	url  map[string]string
	hc   *http.Client
	api  string // the API server's Service address, as the Pods reach it
}

// The Pod's containers and ports beside the overlay's elector.
const (
	splitAppContainer   = "app"
	splitProxyContainer = "faultproxy"
	splitAppPort        = 8080
	splitProxyListen    = "127.0.0.1:6444"
	replicaLabel        = "ringside.io/replica" // on each replica's Pod: its name
)

func newSplitPods(ctx context.Context, c *kube.Cluster, cell splitCell, replicas int, t kube.Timing) (*splitRun, error) {
	rc, err := kubeconfig.Load(c.Kubeconfig())
	if err != nil {
		return nil, err
	}
	rt, err := rest.TransportFor(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes backend: %w", err)
	}
	svc, err := c.CS.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubernetes backend: the API server's Service: %w", err)
	}
	if len(svc.Spec.Ports) == 0 {
		return nil, errors.New("kubernetes backend: the kubernetes Service has no port")
	}
	ns, err := c.Namespace(ctx, "split")
	if err != nil {
		return nil, err
	}
	r := &splitPods{c: c, ns: ns, t: t, cell: cell, pods: replicaNames(replicas), url: map[string]string{},
		hc:  &http.Client{Transport: rt, Timeout: 5 * time.Second},
		api: net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))}
	for _, pod := range r.pods {
		r.url[pod] = strings.TrimSuffix(rc.Host, "/") + "/api/v1/namespaces/" + ns + "/pods/" + pod + ":" + strconv.Itoa(splitAppPort) + "/proxy"
	}
	return &splitRun{cell: cell, t: t, pods: r.pods, url: r.url, hc: r.hc, reps: r}, nil
}

func (r *splitPods) start(ctx context.Context) error {
	tpl, err := r.c.PodTemplate(ctx, r.ns, kube.App{Name: "app", Replicas: len(r.pods), Nodes: r.c.WorkerNodes}, r.cell.alg, "lease", r.t)
	if err != nil {
		return err
	}
	sec := make([]byte, 16)
	crand.Read(sec)
	// The shared secret reaches the applications as a Secret, never on a
	// command line or in a Pod's spec.
	if _, err := r.c.CS.CoreV1().Secrets(r.ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-secret"},
		StringData: map[string]string{"APP_SECRET": hex.EncodeToString(sec)}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubernetes backend: %w", err)
	}
	// Each replica's name resolves to its Pod from its IP on, ready or
	// not: the replicas need each other before they serve.
	if _, err := r.c.CS.CoreV1().Services(r.ns).Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, PublishNotReadyAddresses: true, Selector: map[string]string{"app.kubernetes.io/name": "app"},
			Ports: []v1.ServicePort{{Name: "app", Port: splitAppPort}}}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubernetes backend: %w", err)
	}
	var peers []string
	for _, p := range r.pods {
		peers = append(peers, fmt.Sprintf("%s=http://%s.app.%s.svc:%d", p, p, r.ns, splitAppPort))
	}
	victim := r.pods[0]
	create := func(i int) error {
		pod := r.pod(tpl, i, strings.Join(peers, ","))
		if _, err := r.c.CS.CoreV1().Pods(r.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("kubernetes backend: create pod %s: %w", pod.Name, err)
		}
		return nil
	}
	if err := create(0); err != nil {
		return err
	}
	if err := waitLeader(ctx, r.c, r.ns, victim, r.t); err != nil {
		return err
	}
	for i := 1; i < len(r.pods); i++ {
		if err := create(i); err != nil {
			return err
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		// The replicas only: the namespace may hold others (cle-balanced's
		// controller).
		list, err := r.c.CS.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{LabelSelector: replicaLabel})
		if err != nil {
			return false, nil
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == v1.PodRunning {
				running++
			}
		}
		return running == len(r.pods), nil
	})
	if err != nil {
		return fmt.Errorf("kubernetes backend: the replicas of %s not running: %w", r.ns, err)
	}
	return followVictim(ctx, r.pods, r.url, &http.Client{Transport: r.hc.Transport, Timeout: time.Second})
}

// pod is replica i: the template's elector (reaching the API server
// through the relay, and with the skewed clock on the victim if the cell
// has one), the application and the relay, bound to a worker in turn.
func (r *splitPods) pod(tpl v1.PodTemplateSpec, i int, peers string) *v1.Pod {
	name := r.pods[i]
	spec := *tpl.Spec.DeepCopy()
	spec.NodeName = r.c.WorkerNodes[i%len(r.c.WorkerNodes)]
	spec.Affinity, spec.TopologySpreadConstraints = nil, nil
	spec.Hostname, spec.Subdomain = name, "app"
	spec.TerminationGracePeriodSeconds = new(int64) // the namespace goes at the end; nothing to release
	elector := spec.Containers[0]
	host, port, _ := net.SplitHostPort(splitProxyListen)
	elector.Env = append(elector.Env, v1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: host}, v1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: port})
	if i == 0 && r.cell.fault == faultSkew {
		elector.Env = append(elector.Env, v1.EnvVar{Name: "ELECTOR_CLOCK_RATE", Value: strconv.FormatFloat(r.cell.rate, 'g', -1, 64)})
	}
	sidecar := fmt.Sprintf("http://127.0.0.1:%d", elector.Ports[0].ContainerPort)
	app := v1.Container{
		Name: splitAppContainer, Image: elector.Image, ImagePullPolicy: elector.ImagePullPolicy, Command: []string{"/leaderapp"},
		Args: append([]string{"--addr", fmt.Sprintf(":%d", splitAppPort), "--peers", peers}, appArgs(sidecar, r.cell.fencing)...),
		Env: []v1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "APP_SECRET", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "app-secret"}, Key: "APP_SECRET"}}},
		},
		Ports:           []v1.ContainerPort{{Name: "app", ContainerPort: splitAppPort}},
		SecurityContext: elector.SecurityContext,
	}
	proxy := v1.Container{
		Name: splitProxyContainer, Image: elector.Image, ImagePullPolicy: elector.ImagePullPolicy, Command: []string{"/faultproxy"},
		Args:            []string{"--listen", splitProxyListen, "--delay", (r.t.Renew + r.t.Retry).String(), "--log-level", "warn"},
		SecurityContext: elector.SecurityContext,
	}
	// The relay is a native sidecar (a restartable init container): the
	// kubelet starts it before the elector, which needs the API server
	// from its first request.
	always := v1.ContainerRestartPolicyAlways
	proxy.RestartPolicy = &always
	spec.InitContainers = append(spec.InitContainers, proxy)
	spec.Containers = []v1.Container{elector, app}
	for _, cs := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			// A container that ends says why in its status (Crashed).
			cs[i].TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
		}
	}
	labels := maps.Clone(tpl.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[replicaLabel] = name
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: tpl.Annotations}, Spec: spec}
}

func (r *splitPods) freeze(ctx context.Context, pod string, on bool) error {
	return r.c.FreezeContainers(ctx, r.ns, pod, on, "elector", splitAppContainer)
}

func (r *splitPods) cut(ctx context.Context, pod string, on bool) error {
	return r.c.CutPod(ctx, r.ns, pod, splitProxyContainer, r.api, on)
}

func (r *splitPods) overrun(ctx context.Context, pod string, on bool) error {
	sig := "SIGUSR2"
	if on {
		sig = "SIGUSR1"
	}
	return r.c.SignalContainer(ctx, r.ns, pod, splitProxyContainer, sig)
}

func (r *splitPods) crashed() error { return r.c.Crashed(r.ns) }

// stopApps reads each application's log as the kubelet kept it. The
// applications go on running until the namespace goes; what they apply
// after this is not counted, as on the process backend.
func (r *splitPods) stopApps(ctx context.Context) ([]appliedWrite, error) {
	var out []appliedWrite
	for _, pod := range r.pods {
		b, err := r.c.CS.CoreV1().Pods(r.ns).GetLogs(pod, &v1.PodLogOptions{Container: splitAppContainer}).DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("kubernetes backend: the write log of %s: %w", pod, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if w, ok := parseApplied(sc.Bytes(), pod); ok {
				out = append(out, w)
			}
		}
	}
	return out, nil
}

func (r *splitPods) close() { r.c.StopNamespace(r.ns) }
