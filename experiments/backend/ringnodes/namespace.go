package ringnodes

import (
	"context"
	"fmt"
	"maps"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// RunnerImageEnv names the runner's image in its own environment.
const RunnerImageEnv = "RINGSIDE_RUNNER_IMAGE"

// RunnerImage is the image the in-cluster runner was started from
// ($RINGSIDE_RUNNER_IMAGE, which ringside cluster sets), else
// DefaultRunnerImage: the ring Pods and lb-live's workers run from it.
func RunnerImage() string {
	if img := os.Getenv(RunnerImageEnv); img != "" {
		return img
	}
	return DefaultRunnerImage
}

// CreateNamespace makes a fresh namespace prefix-… labelled as a
// ringside run's, and — inside an in-cluster runner — as its runner's, so
// that the host sweeps it if the runner is stopped half-way.
func CreateNamespace(ctx context.Context, cs kubernetes.Interface, prefix string) (string, error) {
	labels := maps.Clone(ManagedBy)
	if owner := os.Getenv(OwnerEnv); owner != "" {
		labels[OwnerLabel] = owner
	}
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("namespace %s-*: %w", prefix, err)
	}
	return ns.Name, nil
}

// DeleteNamespace deletes ns and everything in it; Kubernetes finishes
// the deletion on its own.
func DeleteNamespace(ctx context.Context, cs kubernetes.Interface, ns string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	return nil
}
