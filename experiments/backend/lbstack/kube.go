package lbstack

import (
	"context"
	"fmt"
	"maps"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	labels := maps.Clone(ringnodes.ManagedBy)
	if owner := os.Getenv(ringnodes.OwnerEnv); owner != "" {
		labels[ringnodes.OwnerLabel] = owner
	}
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ringside-lb-", Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes backend: namespace: %w", err)
	}
	image := os.Getenv("RINGSIDE_RUNNER_IMAGE")
	if image == "" {
		image = ringnodes.DefaultRunnerImage
	}
	k := runtime.NewKube(cs, runtime.KubeOptions{Namespace: ns.Name, Image: image, Command: []string{"/worker"}, Pool: "lb-live"})
	cleanup := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		bg := metav1.DeletePropagationBackground
		cs.CoreV1().Namespaces().Delete(dctx, ns.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
	}
	return k, cleanup, nil
}
