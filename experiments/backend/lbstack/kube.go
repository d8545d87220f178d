package lbstack

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/ringside/ringside/agent/runtime"
	"github.com/ringside/ringside/experiments/backend/ringnodes"
)

// Kubernetes runs the workers as Pods of Deployments in a namespace of
// their own (the agent's Kubernetes runtime), from inside the cluster
// (ringside cluster): the agent and the balancer reach them by Pod IP.
const Kubernetes = "kubernetes"

// kubeWorkers returns the Kubernetes runtime in a fresh namespace, the
// workers run from the runner image's /worker, and its cleanup.
func kubeWorkers(ctx context.Context) (Runtime, func(), error) {
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
	return k, func() { ringnodes.DeleteNamespace(ctx, cs, ns) }, nil
}
