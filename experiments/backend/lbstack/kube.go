package lbstack

import (
	"context"
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/kubernetes"

	"github.com/ringside/ringside/agent/runtime"
	"github.com/ringside/ringside/experiments/backend/ringnodes"
)

// Kubernetes runs the workers as Pods of Deployments in a namespace of
// their own (the agent's Kubernetes runtime), from inside the cluster
// (ringside cluster): the agent and the balancer reach them by Pod IP.
// The agent's Redis and each balancer run as Pods there too (KubeStack).
const Kubernetes = "kubernetes"

// PodIPEnv holds the in-cluster runner's own Pod IP (the downward API's
// status.podIP, which ringside cluster's Job sets): where the Pods it
// starts reach the agent it runs.
const PodIPEnv = "RINGSIDE_POD_IP"

// KubeStack is lb-live's Kubernetes backend: the workers' runtime, and
// the Pods of the agent's Redis and of the balancers beside them in the
// same namespace (kubepods.go).
type KubeStack struct {
	*runtime.Kube
	cs kubernetes.Interface
	ns string
}

// kubeWorkers returns the Kubernetes stack in a fresh namespace, the
// workers run from the runner image's /worker, and its cleanup.
func kubeWorkers(ctx context.Context) (*KubeStack, func(), error) {
	rc, err := ringnodes.InCluster()
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	ns, err := ringnodes.CreateNamespace(ctx, cs, "ringside-lb")
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes backend: %w", err)
	}
	k := runtime.NewKube(cs, runtime.KubeOptions{Namespace: ns, Image: ringnodes.RunnerImage(), Command: []string{"/worker"}, Pool: "lb-live"})
	return &KubeStack{Kube: k, cs: cs, ns: ns}, func() { ringnodes.DeleteNamespace(ctx, cs, ns) }, nil
}

// Self is this runner's address as the stack's Pods see it.
func (k *KubeStack) Self() (string, error) {
	ip := os.Getenv(PodIPEnv)
	if ip == "" {
		return "", errors.New("kubernetes backend: $" + PodIPEnv + " is not set: run lb-live through ringside cluster, whose Job sets it")
	}
	return ip, nil
}
