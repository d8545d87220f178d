package ringnodes

// The faults of a ring on Kubernetes, each asked of the Pods' fault
// agents (package podfault).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kill crashes the server (SIGKILL from its agent); its Pod, IP and data
// stay, as a machine's do when a process dies.
func (k *Kube) Kill(ctx context.Context, addr string) error {
	p, i, err := k.pod(addr)
	if err != nil {
		return fmt.Errorf("kill %w", err)
	}
	// Not cancelled in flight: a cancelled request may still have
	// killed it, and the ring's bookkeeping must say so.
	if err := k.agentDo(context.WithoutCancel(ctx), p, "/kill", nil); err != nil {
		return fmt.Errorf("kill %s: %w", addr, err)
	}
	k.mu.Lock()
	k.pods[i].up = false
	k.mu.Unlock()
	return nil
}

// Restart runs a killed server again, with its data, joining the ring.
func (k *Kube) Restart(ctx context.Context, addr string) error { return k.start(ctx, addr) }

// Add scales the StatefulSet up by one and starts its server.
func (k *Kube) Add(ctx context.Context) (string, error) {
	k.mu.Lock()
	k.replicas++
	n := k.replicas
	k.mu.Unlock()
	scale, err := k.cs.AppsV1().StatefulSets(k.ns).GetScale(ctx, "ringnode", metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("add: %w", err)
	}
	scale.Spec.Replicas = n
	if _, err := k.cs.AppsV1().StatefulSets(k.ns).UpdateScale(ctx, "ringnode", scale, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("add: %w", err)
	}
	return k.startNext(ctx)
}

// Pause freezes the server's process for d (its agent's SIGSTOP, then
// SIGCONT): a frozen machine to its peers.
func (k *Kube) Pause(ctx context.Context, addr string, d time.Duration) error {
	p, _, err := k.pod(addr)
	if err != nil {
		return fmt.Errorf("pause %w", err)
	}
	if err := k.agentDo(context.WithoutCancel(ctx), p, "/pause", url.Values{"for": {d.String()}}); err != nil {
		return fmt.Errorf("pause %s: %w", addr, err)
	}
	return sleep(ctx, d)
}

// Partition cuts the server off for d: its Pod drops what it sends to the
// other servers and to this runner (the clients), and every other Pod
// drops what it sends to it. The cuts heal themselves; it returns once
// the server answers again.
func (k *Kube) Partition(ctx context.Context, addr string, d time.Duration) error {
	p, _, err := k.pod(addr)
	if err != nil {
		return fmt.Errorf("partition %w", err)
	}
	others := k.others([]string{addr})
	cuts := map[string][]netip.Addr{addr: append(ips(others), k.self)}
	for _, o := range others {
		cuts[o.addr()] = []netip.Addr{p.ip}
	}
	if err := k.cut(ctx, cuts, d); err != nil {
		return fmt.Errorf("partition %s: %w", addr, err)
	}
	waited := sleep(ctx, d)
	if err := WaitHealthy(context.WithoutCancel(ctx), addr, nil); err != nil {
		return fmt.Errorf("after the partition of %s: %w", addr, err)
	}
	return waited
}

// Split cuts the ring in two for d: the servers of group reach one
// another, the others reach one another, the runner reaches both, and
// nothing crosses between the sides.
func (k *Kube) Split(ctx context.Context, group []string, d time.Duration) error {
	side := make([]kubePod, 0, len(group))
	for _, a := range group {
		p, _, err := k.pod(a)
		if err != nil {
			return fmt.Errorf("split: %w", err)
		}
		side = append(side, p)
	}
	others := k.others(group)
	if len(side) == 0 || len(others) == 0 {
		return fmt.Errorf("split: a side of %d servers of %d: both sides need one", len(side), len(side)+len(others))
	}
	cuts := map[string][]netip.Addr{}
	for _, p := range side {
		cuts[p.addr()] = ips(others)
	}
	for _, o := range others {
		cuts[o.addr()] = ips(side)
	}
	if err := k.cut(ctx, cuts, d); err != nil {
		return fmt.Errorf("split: %w", err)
	}
	return sleep(ctx, d)
}

// others are the Pods not in addrs that run a server.
func (k *Kube) others(addrs []string) []kubePod {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []kubePod
	for _, p := range k.pods {
		if !slices.Contains(addrs, p.addr()) {
			out = append(out, p)
		}
	}
	return out
}

func ips(pods []kubePod) []netip.Addr {
	out := make([]netip.Addr, len(pods))
	for i, p := range pods {
		out[i] = p.ip
	}
	return out
}

// cut asks each Pod's agent (by server address) to drop what it sends to
// its addresses for d, all at once.
func (k *Kube) cut(ctx context.Context, cuts map[string][]netip.Addr, d time.Duration) error {
	var wg sync.WaitGroup
	errs := make([]error, 0, len(cuts))
	var mu sync.Mutex
	for _, addr := range slices.Sorted(maps.Keys(cuts)) {
		p, _, err := k.pod(addr)
		if err != nil {
			return err
		}
		list := make([]string, len(cuts[addr]))
		for i, ip := range cuts[addr] {
			list[i] = ip.String()
		}
		wg.Go(func() {
			err := k.agentDo(context.WithoutCancel(ctx), p, "/cut", url.Values{"ips": {strings.Join(list, ",")}, "for": {d.String()}})
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
