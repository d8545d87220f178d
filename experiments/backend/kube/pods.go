package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/ringside/ringside/bld"
	"github.com/ringside/ringside/bld/balance"
	"github.com/ringside/ringside/bld/strategy"
	"github.com/ringside/ringside/k8s"
)

// podRunner is the kubernetes backend: the candidates are the elector sidecars
// of real Pods, from the k8s/ overlays, on a cluster with kubelets. Their
// leadership events come from the Pods' logs (the elector's --events
// lines); a leader is lost by deleting its Pod, with no grace period
// (SIGKILL) or the manifest's (the kubelet's SIGTERM), as seed 003 did.
type podRunner struct {
	c      *Cluster
	dyn    dynamic.Interface
	mapper meta.RESTMapper

	mu        sync.Mutex
	streamed  map[string]bool               // ns/pod whose log is being read
	signalled map[string]bool               // ns/pod we deleted
	ended     map[string]chan struct{}      // ns/pod: closed when its log ends
	cancel    map[string]context.CancelFunc // per namespace: its watchers
	logDir    string                        // Cluster.KeepLogs
}

func (r *podRunner) keepLogs(dir string) {
	r.mu.Lock()
	r.logDir = dir
	r.mu.Unlock()
}

func newPodRunner(c *Cluster, rc *rest.Config) (*podRunner, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &podRunner{
		c: c, dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		streamed: map[string]bool{}, signalled: map[string]bool{}, ended: map[string]chan struct{}{}, cancel: map[string]context.CancelFunc{},
	}, nil
}

// overlay is the k8s/overlays entry that runs alg on lock.
func overlay(alg, lock string) (string, error) {
	switch {
	case lock == bld.LockEndpoints && alg == balance.Default:
		return "default-endpoints", nil
	case lock == bld.LockEndpoints:
		return "", fmt.Errorf("kubernetes backend: the endpoints lock has an overlay for the default algorithm only (k8s/overlays/default-endpoints)")
	case alg == balance.BLDLiteral || alg == balance.BLDOptimistic:
		return balance.BLD, nil // the same rights; the algorithm is set below
	}
	return alg, nil
}

func (r *podRunner) deploy(ctx context.Context, ns string, apps []App, _ int, alg, lock string, t Timing) (map[string]string, error) {
	names := make([]string, len(apps))
	for i, a := range apps {
		names[i] = a.Name
	}
	_, launched, err := r.prepare(ctx, ns, apps, alg, lock, t, true)
	if err != nil {
		return nil, err
	}
	for _, a := range apps {
		r.c.record(Event{TS: launched, Event: "launched", ID: ns + "/" + a.Name, Election: ns + "/" + a.Name})
	}
	// Every replica of these applications running (ns may hold earlier
	// ones), each on one of its application's nodes.
	podNode := map[string]string{}
	these := "app.kubernetes.io/name in (" + strings.Join(names, ",") + ")"
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := r.c.CS.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: these})
		if err != nil {
			return false, nil
		}
		running := map[string]string{}
		for _, p := range list.Items {
			if p.Status.Phase == v1.PodRunning && p.DeletionTimestamp == nil {
				running[ns+"/"+p.Name] = p.Spec.NodeName
			}
		}
		podNode = running
		want := 0
		for _, a := range apps {
			want += a.Replicas
		}
		return len(running) >= want, nil
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes backend: %d pods running in %s: %w%s", len(podNode), ns, err, r.waiting(ns, these))
	}
	return podNode, nil
}

// prepare creates the objects of the overlay that runs alg on lock for
// apps in ns — accounts, roles, shared objects, and with deployments each
// application's Deployment, shaped by shape — starts reading the elector
// logs of ns, and returns each application's shaped Pod template and when
// the first Deployment was sent. The applications' Deployments go last,
// after the objects they need; with cle-balanced, once the strategy
// controller controls (awaitController).
func (r *podRunner) prepare(ctx context.Context, ns string, apps []App, alg, lock string, t Timing, deployments bool) (map[string]v1.PodTemplateSpec, time.Time, error) {
	ov, err := overlay(alg, lock)
	if err != nil {
		return nil, time.Time{}, err
	}
	objs, err := k8s.Render(ov)
	if err != nil {
		return nil, time.Time{}, err
	}
	names := make([]string, len(apps))
	for i, a := range apps {
		names[i] = a.Name
	}
	if objs, err = k8s.Applications(objs, names...); err != nil {
		return nil, time.Time{}, err
	}
	r.watch(ns)
	var before string
	if alg == balance.CLEBalanced {
		before = controllerLease(ctx, r.c.CS, ns)
	}
	templates := map[string]v1.PodTemplateSpec{}
	var later []*unstructured.Unstructured // the applications' Deployments
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			continue // Cluster.Namespace made ns
		case "ClusterRoleBinding", "RoleBinding":
			// The accounts of ns; a nodes binding per deployment,
			// labelled with ns so that stop finds them.
			if o.GetKind() == "ClusterRoleBinding" {
				o.SetName(o.GetName() + "-" + ns + "-" + names[0])
				o.SetLabels(map[string]string{NamespaceLabel: ns})
			}
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = ns
			}
			if err := unstructured.SetNestedSlice(o.Object, subjects, "subjects"); err != nil {
				return nil, time.Time{}, err
			}
		case "Deployment":
			i := slices.Index(names, o.GetName())
			if i < 0 {
				break // not an application's: cle-balanced's controller, as the overlay has it
			}
			d, err := r.shape(o, apps[i], alg, t)
			if err != nil {
				return nil, time.Time{}, err
			}
			templates[names[i]] = d.Spec.Template
			if deployments {
				later = append(later, o)
			}
			continue
		}
		shared := o.GetName() != "" && !slices.ContainsFunc(names, func(n string) bool { return o.GetName() == n || o.GetName() == n+"-elector" })
		if err := r.create(ctx, ns, o, shared); err != nil {
			return nil, time.Time{}, err
		}
	}
	if alg == balance.CLEBalanced {
		if err := awaitController(ctx, r.c.CS, ns, before); err != nil {
			return nil, time.Time{}, fmt.Errorf("kubernetes backend: %w", err)
		}
	}
	launched := time.Now()
	for _, o := range later {
		if err := r.create(ctx, ns, o, false); err != nil {
			return nil, time.Time{}, err
		}
	}
	return templates, launched, nil
}

// shape sets what the experiment varies on an application's Deployment:
// replicas, placement (only app.Nodes, spread evenly), the algorithm and
// its timing, and the events the backend reads from the log.
func (r *podRunner) shape(o *unstructured.Unstructured, app App, alg string, t Timing) (*appsv1.Deployment, error) {
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
		return nil, err
	}
	replicas := int32(app.Replicas)
	d.Spec.Replicas = &replicas
	spec := &d.Spec.Template.Spec
	spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: app.Nodes}}}},
	}}}
	for i := range spec.TopologySpreadConstraints {
		spec.TopologySpreadConstraints[i].WhenUnsatisfiable = v1.DoNotSchedule
	}
	if a := strategyAnnotations(alg, t); a != nil {
		if d.Spec.Template.Annotations == nil {
			d.Spec.Template.Annotations = map[string]string{}
		}
		maps.Copy(d.Spec.Template.Annotations, a)
	}
	c := &spec.Containers[0]
	setEnv(c, "ELECTOR_ALGORITHM", alg)
	setEnv(c, "ELECTOR_EVENTS", "true")
	r.mu.Lock()
	level := "error"
	if r.logDir != "" {
		level = "debug" // Cluster.KeepLogs
	}
	r.mu.Unlock()
	setEnv(c, "ELECTOR_LOG", level)
	setEnv(c, "ELECTOR_LEASE_DURATION", t.Lease.String())
	setEnv(c, "ELECTOR_RENEW_DEADLINE", t.Renew.String())
	setEnv(c, "ELECTOR_RETRY_PERIOD", t.Retry.String())
	if at := app.campaignAt(); at != "" {
		setEnv(c, "ELECTOR_CAMPAIGN_AT", at)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&d)
	if err != nil {
		return nil, err
	}
	o.Object = u
	return &d, nil
}

// strategyAnnotations are what a cle-balanced application's Pods
// announce to the strategy controller, so that it names the first holder
// before the candidates start (bld.StrategyAnnotation); none for the
// other algorithms.
func strategyAnnotations(alg string, t Timing) map[string]string {
	if alg != balance.CLEBalanced {
		return nil
	}
	return map[string]string{bld.StrategyAnnotation: strategy.Name, bld.LeaseDurationAnnotation: t.Lease.String()}
}

func setEnv(c *v1.Container, name, value string) {
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i].Value, c.Env[i].ValueFrom = value, nil
			return
		}
	}
	c.Env = append(c.Env, v1.EnvVar{Name: name, Value: value})
}

// create creates o in ns; one that exists already is fine for a
// cluster-scoped object and for a namespace's shared one (cle-balanced's
// controller, deployed with the namespace's first application).
func (r *podRunner) create(ctx context.Context, ns string, o *unstructured.Unstructured, shared bool) error {
	gvk := o.GroupVersionKind()
	m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("kubernetes backend: %s: %w", gvk, err)
	}
	var ri dynamic.ResourceInterface = r.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		o.SetNamespace(ns)
		ri = r.dyn.Resource(m.Resource).Namespace(ns)
	}
	_, err = ri.Create(ctx, o, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) && (shared || m.Scope.Name() != meta.RESTScopeNameNamespace) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubernetes backend: create %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}

// waiting says why the Pods selected in ns are not running (an image not
// loaded into the nodes shows as ErrImageNeverPull or ErrImagePull).
func (r *podRunner) waiting(ns, selector string) string {
	list, err := r.c.CS.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return ""
	}
	why := map[string]int{}
	for _, p := range list.Items {
		for _, s := range p.Status.ContainerStatuses {
			if w := s.State.Waiting; w != nil {
				why[w.Reason+": "+w.Message]++
			}
		}
	}
	out := ""
	for w, n := range why {
		out += fmt.Sprintf("; %d waiting (%s)", n, w)
	}
	return out
}

// crashed names the electors of ns that restarted or exited without
// being deleted by the experiment. When each of them only failed to
// start (ErrStartFailed), the error says so: the runtime, not the
// elector, failed, and a caller may run the set again.
func (r *podRunner) crashed(ns string) error {
	list, err := r.c.CS.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil // unknown, not a crash
	}
	var errs []error
	startOnly := true
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range list.Items {
		if r.signalled[ns+"/"+p.Name] {
			continue
		}
		pe, start := podCrashes(ns, &p)
		errs = append(errs, pe...)
		startOnly = startOnly && start
	}
	if len(errs) > 0 && startOnly {
		return fmt.Errorf("%w: %w", ErrStartFailed, errors.Join(errs...))
	}
	return errors.Join(errs...)
}

// ErrStartFailed marks electors whose containers the runtime failed to
// create (kubelet's StartError: on kind, runc once answered `namespace
// path: lstat /proc/0/ns/ipc: no such file or directory` for a sandbox
// that had gone): the elector never ran, so nothing it did is at fault.
var ErrStartFailed = errors.New("the container runtime failed to start an elector")

// podCrashes names p's containers that restarted or exited (an init
// container's clean exit aside), and reports whether each of them ended
// only in StartError, before the elector ran.
func podCrashes(ns string, p *v1.Pod) (errs []error, startOnly bool) {
	startOnly = true
	for i, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		done := i < len(p.Status.InitContainerStatuses) && s.State.Terminated != nil && s.State.Terminated.ExitCode == 0 // an init container's end
		if s.RestartCount == 0 && (s.State.Terminated == nil || done) {
			continue
		}
		t := s.State.Terminated
		if t == nil {
			t = s.LastTerminationState.Terminated
		}
		why := ""
		if t != nil {
			why = fmt.Sprintf(": %s, exit %d: %s", t.Reason, t.ExitCode, t.Message)
		}
		// A restart count above one means it ran at least once more
		// after the failed start, which the last state cannot vouch for.
		startOnly = startOnly && t != nil && t.Reason == "StartError" && s.RestartCount <= 1
		errs = append(errs, fmt.Errorf("container %s of %s/%s ended (restarted %d times)%s", s.Name, ns, p.Name, s.RestartCount, why))
	}
	return errs, startOnly
}

// stop deletes ns (the cluster's namespace controller empties it) and its
// nodes binding, and stops reading its logs.
func (r *podRunner) stop(ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.mu.Lock()
	if c := r.cancel[ns]; c != nil {
		c()
		delete(r.cancel, ns)
	}
	r.mu.Unlock()
	zero := int64(0)
	r.c.CS.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	r.c.CS.RbacV1().ClusterRoleBindings().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: NamespaceLabel + "=" + ns})
}

func (r *podRunner) close() {
	r.mu.Lock()
	var nss []string
	for ns := range r.cancel {
		nss = append(nss, ns)
	}
	r.mu.Unlock()
	for _, ns := range nss {
		r.stop(ns)
	}
}
