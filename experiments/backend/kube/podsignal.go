package kube

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// signal loses pod's elector. SIGTERM deletes the Pod with the
// manifest's grace period: the kubelet sends SIGTERM and the elector
// releases its lease. SIGKILL must leave the lease unreleased, and the
// kubelet cannot do that: a Pod deleted with no grace period still gets
// SIGTERM and the 2 s minimum, and an elector killed in place is restarted
// under the same identity at once and takes its own lease straight back
// (seen: renewals went on). So SIGKILL stops the elector (SIGSTOP, through
// the node's containerd: a kind node is a container named after it) — from
// that instant it neither renews nor releases, as if killed — and deletes
// its Pod with no grace period; the kubelet's SIGTERM stays pending and
// its SIGKILL ends the process. It waits until the elector's log has
// ended.
func (r *podRunner) signal(ctx context.Context, ns, pod string, sig syscall.Signal) (time.Time, error) {
	kill := sig == syscall.SIGKILL
	key := ns + "/" + pod
	r.mu.Lock()
	r.signalled[key] = true
	ended := r.ended[key]
	r.mu.Unlock()
	opts := metav1.DeleteOptions{}
	at := time.Now()
	if kill {
		node, id, err := r.c.container(ctx, ns, pod, "elector")
		if err != nil {
			return at, err
		}
		at = time.Now()
		if _, err := onNode(ctx, node, ctr("task", "kill", "--signal", "SIGSTOP", id)...); err != nil {
			return at, err
		}
		r.c.record(Event{TS: at, Event: "killed", ID: key, Election: ns + "/" + electionOf(pod)})
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	if err := r.c.CS.CoreV1().Pods(ns).Delete(ctx, pod, opts); err != nil {
		return at, fmt.Errorf("kubernetes backend: delete pod %s: %w", key, err)
	}
	if ended != nil {
		select {
		case <-ended:
		case <-ctx.Done():
			return at, ctx.Err()
		}
	}
	return at, nil
}

// electionOf is a Deployment Pod's application: its name less the
// ReplicaSet hash and the Pod suffix.
func electionOf(pod string) string {
	parts := strings.Split(pod, "-")
	if len(parts) < 3 {
		return pod
	}
	return strings.Join(parts[:len(parts)-2], "-")
}
