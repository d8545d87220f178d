// Command podnet is the pod network agent of ringside's kind node image
// (k8s/node/kind/manifests/default-cni.yaml runs it on every node): it
// watches the Nodes, writes this node's bridge CNI config once the
// controller manager has given the node a pod range, and keeps a route to
// every other node's range (package podnet has the plan).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/ringside/ringside/internal/envflag"
	"github.com/ringside/ringside/internal/kubeconfig"
	"github.com/ringside/ringside/internal/serve"
	"github.com/ringside/ringside/k8s/podnet"
)

func main() { serve.Main("podnet", run) }

func run(ctx context.Context, args []string) error {
	fs := envflag.New(flag.NewFlagSet("podnet", flag.ContinueOnError))
	var node, kubeconfig, endpoint, confPath, level string
	var proto int
	var resync time.Duration
	fs.StringVar(&node, "node", "NODE_NAME", "", "this node's name (downward API spec.nodeName)")
	fs.StringVar(&kubeconfig, "kubeconfig", "KUBECONFIG", "", "kubeconfig (default: in-cluster)")
	fs.StringVar(&endpoint, "control-plane", "CONTROL_PLANE_ENDPOINT", "", "API server host:port to use instead of the kubernetes Service (kind sets it, so the network does not wait for kube-proxy)")
	fs.StringVar(&confPath, "cni-conf", "PODNET_CNI_CONF", "/etc/cni/net.d/10-podnet.conflist", "CNI config file to write")
	fs.IntVar(&proto, "route-proto", "PODNET_ROUTE_PROTO", 90, "routing protocol number marking podnet's routes (1-255)")
	fs.DurationVar(&resync, "resync", "PODNET_RESYNC", 30*time.Second, "re-apply the plan this often even without a change")
	fs.StringVar(&level, "log-level", "PODNET_LOG", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := serve.Logger(level)
	if err != nil {
		return err
	}
	if node == "" {
		return fmt.Errorf("--node (NODE_NAME) is required")
	}
	if proto < 1 || proto > 255 {
		return fmt.Errorf("--route-proto %d: want 1-255", proto)
	}
	if resync <= 0 {
		return fmt.Errorf("--resync %v: want a positive duration", resync)
	}
	rc, err := clientConfig(kubeconfig, endpoint)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}

	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := factory.Core().V1().Nodes()
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(_, n any) { poke(n) },
		DeleteFunc: poke,
	}); err != nil {
		return fmt.Errorf("watch nodes: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		return ctx.Err()
	}
	a := &applier{log: log, node: node, conf: confPath, proto: strconv.Itoa(proto)}
	tick := time.NewTicker(resync)
	defer tick.Stop()
	for {
		list, err := nodes.Lister().List(labels.Everything())
		if err != nil {
			return fmt.Errorf("list nodes: %w", err)
		}
		a.apply(ctx, list)
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
		}
	}
}

func clientConfig(path, endpoint string) (*rest.Config, error) {
	rc, err := kubeconfig.Load(path)
	if err != nil {
		return nil, err
	}
	if endpoint != "" {
		rc.Host = "https://" + endpoint
	}
	return rc, nil
}

// applier carries a plan out on this node: the CNI config file and the
// routes marked with proto.
type applier struct {
	log   *slog.Logger
	node  string
	conf  string
	proto string
}

func (a *applier) apply(ctx context.Context, list []*corev1.Node) {
	in := make([]podnet.Node, 0, len(list))
	for _, n := range list {
		pn := podnet.Node{Name: n.Name, PodCIDRs: n.Spec.PodCIDRs}
		if len(pn.PodCIDRs) == 0 && n.Spec.PodCIDR != "" {
			pn.PodCIDRs = []string{n.Spec.PodCIDR}
		}
		for _, addr := range n.Status.Addresses {
			if addr.Type == corev1.NodeInternalIP {
				pn.InternalIP = addr.Address
				break
			}
		}
		in = append(in, pn)
	}
	plan, errs := podnet.Compute(a.node, in)
	for _, err := range errs {
		a.log.Debug("node left out of the plan", "err", err)
	}
	if err := a.writeConf(plan); err != nil {
		a.log.Warn("CNI config not written", "err", err)
	}
	if err := a.routes(ctx, plan.Routes); err != nil {
		a.log.Warn("routes not applied", "err", err)
	}
}

// writeConf replaces the config atomically, and only when it changes: the
// kubelet reports the node Ready once a config is there.
func (a *applier) writeConf(plan podnet.Plan) error {
	b, err := podnet.Conflist(plan)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(a.conf); err == nil && bytes.Equal(old, b) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(a.conf), ".podnet-*")
	if err != nil {
		return fmt.Errorf("CNI config: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("CNI config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("CNI config: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("CNI config: %w", err)
	}
	if err := os.Rename(tmp.Name(), a.conf); err != nil {
		return fmt.Errorf("CNI config: %w", err)
	}
	a.log.Info("wrote CNI config", "path", a.conf, "subnets", fmt.Sprint(plan.Subnets))
	return nil
}

func (a *applier) routes(ctx context.Context, want []podnet.Route) error {
	out, err := exec.CommandContext(ctx, "ip", "-json", "-4", "route", "show", "proto", a.proto).Output()
	if err != nil {
		return fmt.Errorf("ip route show: %w", err)
	}
	have, err := podnet.ParseRoutes(out)
	if err != nil {
		return err
	}
	replace, remove := podnet.Diff(have, want)
	for _, r := range replace {
		if err := ip(ctx, "route", "replace", r.Dst.String(), "via", r.Via.String(), "proto", a.proto); err != nil {
			return err
		}
		a.log.Info("route", "dst", r.Dst, "via", r.Via)
	}
	for _, r := range remove {
		if err := ip(ctx, "route", "del", r.Dst.String(), "via", r.Via.String(), "proto", a.proto); err != nil {
			return err
		}
		a.log.Info("route removed", "dst", r.Dst, "via", r.Via)
	}
	return nil
}

func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %v: %w: %s", args, err, bytes.TrimSpace(out))
	}
	return nil
}
