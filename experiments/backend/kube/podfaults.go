package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kubernetes backend's faults on one Pod, for experiments that build their
// replicas by hand (kube-split-brain): each is done on the Pod's node
// through its container runtime — a kind node is a container named after
// it, with containerd's ctr and the node's iptables — so that nothing in
// the Pod needs a privilege or a tool of its own.

// errNotKind refuses a Pod fault on the process backend, whose electors
// are processes (it has Processes.Freeze and fault relays instead).
var errNotKind = errors.New("this needs the kubernetes backend: the kube backend's electors are local processes")

// PodTemplate prepares ns for hand-made replicas of app on the kind
// backend — the overlay's accounts and roles for alg on lock, its shared
// objects (cle-balanced's controller), the elector logs of ns read for
// events — and returns the application's Pod template with the elector
// shaped for alg and t, as Deploy would run it.
func (c *Cluster) PodTemplate(ctx context.Context, ns string, app App, alg, lock string, t Timing) (v1.PodTemplateSpec, error) {
	r, ok := c.el.(*podRunner)
	if !ok {
		return v1.PodTemplateSpec{}, errNotKind
	}
	tpl, _, err := r.prepare(ctx, ns, []App{app}, alg, lock, t, false)
	return tpl[app.Name], err
}

// container is the node and containerd ID of a running container of pod;
// every Pod fault starts here, so the process backend is refused here.
func (c *Cluster) container(ctx context.Context, ns, pod, name string) (node, id string, err error) {
	if _, ok := c.el.(*podRunner); !ok {
		return "", "", errNotKind
	}
	p, err := c.CS.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", "", fmt.Errorf("kubernetes backend: %w", err)
	}
	// A native sidecar's status is among the init containers'.
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if s.Name == name && s.State.Running != nil {
			return p.Spec.NodeName, strings.TrimPrefix(s.ContainerID, "containerd://"), nil
		}
	}
	return "", "", fmt.Errorf("kubernetes backend: pod %s/%s has no running container %q", ns, pod, name)
}

// onNode runs a command in kind node node and returns its output.
func onNode(ctx context.Context, node string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", append([]string{"exec", node}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kubernetes backend: on node %s: %s: %w: %s", node, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func ctr(args ...string) []string { return append([]string{"ctr", "--namespace=k8s.io"}, args...) }

// FreezeContainers freezes (the cgroup freezer: `ctr task pause`) or
// thaws the named containers of pod — every process in them stops at
// once, as in a VM pause or a stop-the-world GC, and resumes where it was.
func (c *Cluster) FreezeContainers(ctx context.Context, ns, pod string, on bool, containers ...string) error {
	verb := "resume"
	if on {
		verb = "pause"
	}
	var errs []error
	for _, name := range containers {
		node, id, err := c.container(ctx, ns, pod, name)
		if err == nil {
			_, err = onNode(ctx, node, ctr("task", verb, id)...)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// SignalContainer sends sig (a name: SIGUSR1) to the main process of a
// container of pod.
func (c *Cluster) SignalContainer(ctx context.Context, ns, pod, container, sig string) error {
	node, id, err := c.container(ctx, ns, pod, container)
	if err != nil {
		return err
	}
	_, err = onNode(ctx, node, ctr("task", "kill", "--signal", sig, id)...)
	return err
}

// CutPod rejects (on), or lets through again, every TCP segment pod
// sends to dst (ip:port) — a rule in the Pod's network namespace,
// entered from its node, the way chaos tools partition a Pod. A rejected
// segment answers with a reset, so held connections fail at once, as
// when a network drops a flow's state. container is any running
// container of the Pod (they share the namespace).
func (c *Cluster) CutPod(ctx context.Context, ns, pod, container, dst string, on bool) error {
	host, port, err := net.SplitHostPort(dst)
	if n, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil || n == 0 || net.ParseIP(host) == nil {
		return fmt.Errorf("kubernetes backend: cut %s/%s from %q: want ip:port", ns, pod, dst)
	}
	node, id, err := c.container(ctx, ns, pod, container)
	if err != nil {
		return err
	}
	pid, err := taskPID(ctx, node, id)
	if err != nil {
		return err
	}
	op := "-D"
	if on {
		op = "-I"
	}
	_, err = onNode(ctx, node, "nsenter", "--target", pid, "--net", "iptables", op, "OUTPUT",
		"-p", "tcp", "-d", host, "--dport", port, "-j", "REJECT", "--reject-with", "tcp-reset")
	return err
}

// taskPID is the host PID (as the node sees it) of container id's main
// process, from `ctr task ls`: TASK PID STATUS.
func taskPID(ctx context.Context, node, id string) (string, error) {
	out, err := onNode(ctx, node, ctr("task", "ls")...)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("kubernetes backend: node %s runs no task %s", node, id)
}
