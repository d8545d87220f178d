package kubeexp

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ringside/ringside/experiments/backend/kube"
)

// kube-rebalance's changes to the cluster's nodes: a node drained and
// cordoned, a node joining and leaving again.

// drain evicts node's candidates as kubectl drain does: the node
// cordoned, then every Pod on it deleted at once (Cluster.Signal with
// SIGTERM). It returns once every application leads elsewhere. One Pod
// at a time, as a first version had it, left the node's last candidates
// registered for a second or more on a loaded machine, and cle-balanced
// moved leaders onto them.
func (r *Rebalance) drain(ctx context.Context, c *kube.Cluster, ns, node string, names []string, podNode map[string]string) error {
	if err := cordon(ctx, c, node, true); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	for id, n := range podNode {
		if n != node {
			continue
		}
		g.Go(func() error {
			if _, err := c.Signal(gctx, ns, strings.TrimPrefix(id, ns+"/"), syscall.SIGTERM); err != nil {
				return fmt.Errorf("drain %s: %w", node, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	limit := 2*r.timing.Lease + 30*time.Second
	deadline := time.Now().Add(limit)
	for {
		moved := 0
		for _, a := range names {
			if id, _ := c.Leader(ns, a); id != "" && podNode[id] != node {
				moved++
			}
		}
		if moved == len(names) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drain %s: %d of %d applications lead elsewhere after %s", node, moved, len(names), limit)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// cordon marks node unschedulable (on) or schedulable again: BLD counts
// only schedulable workers.
func cordon(ctx context.Context, c *kube.Cluster, node string, on bool) error {
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on)
	if _, err := c.CS.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cordon %s (%v): %w", node, on, err)
	}
	return nil
}

// join brings node into the cluster: the process backend registers it
// (it has no kubelet to) and removes it again when the run ends; on kind
// the held-back worker is uncordoned, and cordoned again at the end.
func (r *Rebalance) join(ctx context.Context, c *kube.Cluster, backend, node string) error {
	if backend == kube.BackendPods {
		return cordon(ctx, c, node, false)
	}
	_, err := c.CS.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("join %s: %w", node, err)
	}
	return nil
}

// leave undoes join for the next repetition.
func (r *Rebalance) leave(c *kube.Cluster, backend, node string) {
	if backend == kube.BackendPods {
		cordon(context.Background(), c, node, true)
		return
	}
	c.CS.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
}
