package runtime

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// KubeOptions configure the Kubernetes runtime.
type KubeOptions struct {
	Namespace string   // where the workers' Deployments and Pods live
	Image     string   // worker image, present on the nodes
	Pool      string   // value of the ringside.pool label
	Port      int      // the worker's HTTP port (default 8080)
	Command   []string // the container's command (default: the image's entrypoint)
	Args      []string
}

// LabelDeployment, on a worker Pod, names the Deployment it belongs to:
// the one a sundown scales down.
const LabelDeployment = "ringside.io/deployment"

// deletionCost is the annotation a ReplicaSet reads when it picks which
// of its Pods a scale-down removes (lowest cost first).
const deletionCost = "controller.kubernetes.io/pod-deletion-cost"

// Kube runs workers as the Pods of Deployments, one Deployment per worker
// shape (CPU limit, default or not): a scale-up raises its replicas, a
// sundown removes exactly the chosen Pod — it gets the lowest deletion
// cost, then its Deployment is scaled down by one. Samples come from the
// kubelet through the API server's node proxy: CPU and memory from its
// resource metrics (/metrics/resource, what metrics-server reads) — the
// container's cumulative CPU time at the kubelet's own millisecond
// timestamp, so rates are right however often it refreshes (the Summary
// API's timestamps are whole seconds: a second's error in a window of a
// few) — and network bytes from its Summary API.
type Kube struct {
	cs kubernetes.Interface
	o  KubeOptions

	mu      sync.Mutex
	pods    map[string]listedPod // what List saw of each worker Pod
	summary map[string]cachedSummary
	cpus    map[string]int // node → allocatable CPUs, for an unlimited worker
}

// listedPod is what Sample needs of a worker Pod, kept from List so
// that a sample costs no API request of its own.
type listedPod struct {
	node     string
	memLimit uint64 // bytes; 0: none
}

// NewKube returns a runtime on cs's cluster.
func NewKube(cs kubernetes.Interface, o KubeOptions) *Kube {
	if o.Port == 0 {
		o.Port = 8080
	}
	return &Kube{cs: cs, o: o, pods: map[string]listedPod{}, summary: map[string]cachedSummary{}, cpus: map[string]int{}}
}

func (k *Kube) selector() string {
	set := labels.Set{LabelRole: RoleWorker}
	if k.o.Pool != "" {
		set[LabelPool] = k.o.Pool
	}
	return set.String()
}

// List returns the workers whose Pods run and are ready, by name.
func (k *Kube) List(ctx context.Context) ([]Instance, error) {
	pods, err := k.cs.CoreV1().Pods(k.o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: k.selector()})
	if err != nil {
		return nil, fmt.Errorf("list worker pods: %w", err)
	}
	var out []Instance
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != v1.PodRunning || !PodReady(&p) || p.Status.PodIP == "" || len(p.Spec.Containers) == 0 {
			continue
		}
		lp := listedPod{node: p.Spec.NodeName}
		if lim := p.Spec.Containers[0].Resources.Limits.Memory(); lim != nil && lim.Value() > 0 {
			lp.memLimit = uint64(lim.Value())
		}
		k.pods[p.Name] = lp
		out = append(out, Instance{
			ID: p.Name, Name: p.Name, Addr: net.JoinHostPort(p.Status.PodIP, strconv.Itoa(k.o.Port)),
			Default: p.Labels[LabelDefault] == "true", CPULimit: p.Spec.Containers[0].Resources.Limits.Cpu().AsApproximateFloat64(),
		})
	}
	// The worker answers with its hostname, the Pod's name: requests,
	// stats and the dashboard speak of the same thing.
	slices.SortFunc(out, func(a, b Instance) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// PodReady reports the Pod's Ready condition.
func PodReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// deploymentFor names the Deployment of a worker shape, or of a named
// worker (lb-live's w1-1cpu): its Pods' names, which the workers answer
// with, start with it. A dot is no part of a Pod's hostname.
func (k *Kube) deploymentFor(sp Spec) string {
	if sp.Name != "" {
		return strings.ToLower(strings.ReplaceAll(sp.Name, ".", "p"))
	}
	name := fmt.Sprintf("worker-%dm", int64(math.Round(sp.CPULimit*1000)))
	if sp.CPULimit == 0 {
		name = "worker-unlimited"
	}
	if sp.MemoryMB > 0 {
		name += fmt.Sprintf("-%dmi", sp.MemoryMB)
	}
	if sp.Default {
		name += "-default"
	}
	return name
}

func (k *Kube) deployment(name string, sp Spec) *appsv1.Deployment {
	lbl := map[string]string{LabelRole: RoleWorker, LabelDefault: strconv.FormatBool(sp.Default), LabelDeployment: name}
	if k.o.Pool != "" {
		lbl[LabelPool] = k.o.Pool
	}
	res := v1.ResourceRequirements{Limits: v1.ResourceList{}, Requests: v1.ResourceList{}}
	if sp.CPULimit > 0 {
		q := resource.NewMilliQuantity(int64(math.Round(sp.CPULimit*1000)), resource.DecimalSI)
		res.Limits[v1.ResourceCPU], res.Requests[v1.ResourceCPU] = *q, *q
	}
	if sp.MemoryMB > 0 {
		q := resource.NewQuantity(int64(sp.MemoryMB)<<20, resource.BinarySI)
		res.Limits[v1.ResourceMemory], res.Requests[v1.ResourceMemory] = *q, *q
	}
	one, no := int32(1), false
	args := append([]string{"--addr", ":" + strconv.Itoa(k.o.Port)}, k.o.Args...)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelDeployment: name}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: v1.PodSpec{
					AutomountServiceAccountToken: &no, EnableServiceLinks: &no,
					Containers: []v1.Container{{
						Name: workerContainer, Image: k.o.Image, ImagePullPolicy: v1.PullIfNotPresent, Command: k.o.Command, Args: args, Resources: res,
						Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(k.o.Port)}},
						ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz",
							Port: intstr.FromInt(k.o.Port)}}, PeriodSeconds: 1},
					}},
				},
			},
		},
	}
}

// Start adds a worker of sp's shape: its Deployment scaled up by one (or
// created), and returns the new Pod once it is ready.
func (k *Kube) Start(ctx context.Context, sp Spec) (Instance, error) {
	before, err := k.List(ctx)
	if err != nil {
		return Instance{}, err
	}
	name := k.deploymentFor(sp)
	deps := k.cs.AppsV1().Deployments(k.o.Namespace)
	if _, err := deps.Create(ctx, k.deployment(name, sp), metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		if err := k.scale(ctx, name, +1); err != nil {
			return Instance{}, err
		}
	} else if err != nil {
		return Instance{}, fmt.Errorf("create worker deployment %s: %w", name, err)
	}
	var added Instance
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := k.List(ctx)
		if err != nil {
			return false, err
		}
		for _, in := range list {
			if !slices.ContainsFunc(before, func(b Instance) bool { return b.ID == in.ID }) {
				added = in
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return Instance{}, fmt.Errorf("worker deployment %s: no new ready Pod: %w", name, err)
	}
	return added, nil
}

// scale changes a Deployment's replicas by delta (never below 0).
func (k *Kube) scale(ctx context.Context, name string, delta int32) error {
	deps := k.cs.AppsV1().Deployments(k.o.Namespace)
	s, err := deps.GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("scale worker deployment %s: %w", name, err)
	}
	s.Spec.Replicas = max(0, s.Spec.Replicas+delta)
	if _, err := deps.UpdateScale(ctx, name, s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("scale worker deployment %s: %w", name, err)
	}
	return nil
}

// Stop removes exactly the worker's Pod: the lowest deletion cost tells
// its ReplicaSet which Pod the scale-down that follows takes. A worker
// already gone is not an error.
func (k *Kube) Stop(ctx context.Context, id string) error {
	pods := k.cs.CoreV1().Pods(k.o.Namespace)
	p, err := pods.Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stop worker %s: %w", id, err)
	}
	dep := p.Labels[LabelDeployment]
	if dep == "" {
		return fmt.Errorf("stop worker %s: no %s label: not a worker this runtime started", id, LabelDeployment)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, deletionCost, strconv.Itoa(math.MinInt32))
	if _, err := pods.Patch(ctx, id, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("stop worker %s: deletion cost: %w", id, err)
	}
	if err := k.scale(ctx, dep, -1); err != nil {
		return fmt.Errorf("stop worker %s: %w", id, err)
	}
	k.mu.Lock()
	delete(k.pods, id)
	k.mu.Unlock()
	return nil
}

// SetCPULimit changes a running worker's CPU limit (and request) in place
// — the Pod is resized, not replaced; that needs the
// InPlacePodVerticalScaling feature gate (alpha in v1.32: k8s/kind.yaml
// turns it on), and the API server refuses the resize where it is off.
func (k *Kube) SetCPULimit(ctx context.Context, id string, cpus float64) error {
	q := resource.NewMilliQuantity(int64(math.Round(cpus*1000)), resource.DecimalSI).String()
	patch := fmt.Sprintf(`{"spec":{"containers":[{"name":%q,"resources":{"limits":{"cpu":%q},"requests":{"cpu":%q}}}]}}`, workerContainer, q, q)
	// Through the Pod's resize subresource: from v1.32 the spec's
	// resources change there only.
	if _, err := k.cs.CoreV1().Pods(k.o.Namespace).Patch(ctx, id, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "resize"); err != nil {
		return fmt.Errorf("resize worker %s to %s CPU (in-place resize needs the InPlacePodVerticalScaling feature gate): %w", id, q, err)
	}
	return nil
}

// RemoveAll deletes every worker Deployment of the pool.
func (k *Kube) RemoveAll(ctx context.Context) error {
	err := k.cs.AppsV1().Deployments(k.o.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: k.selector()})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove workers: %w", err)
	}
	return nil
}
