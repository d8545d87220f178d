package runtime

// What the Kubernetes runtime reads of a worker, from its node's kubelet.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	stats "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/ringside/ringside/agent/score"
)

type cachedSummary struct {
	at      time.Time
	sum     *stats.Summary
	metrics map[string]*dto.MetricFamily
}

// summaryTTL lets one node's summary serve every worker on it in one
// agent step.
const summaryTTL = 500 * time.Millisecond

// NodeSummary reads a node's kubelet Summary through the API server.
func NodeSummary(ctx context.Context, cs kubernetes.Interface, node string) (*stats.Summary, error) {
	raw, err := cs.CoreV1().RESTClient().Get().Resource("nodes").Name(node).SubResource("proxy").Suffix("stats/summary").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("kubelet summary of node %s: %w", node, err)
	}
	var s stats.Summary
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("kubelet summary of node %s: %w", node, err)
	}
	return &s, nil
}

// NodeMetrics reads a node's kubelet resource metrics through the API
// server.
func NodeMetrics(ctx context.Context, cs kubernetes.Interface, node string) (map[string]*dto.MetricFamily, error) {
	rc, err := cs.CoreV1().RESTClient().Get().Resource("nodes").Name(node).SubResource("proxy").Suffix("metrics/resource").Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("kubelet resource metrics of node %s: %w", node, err)
	}
	defer rc.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(io.LimitReader(rc, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("kubelet resource metrics of node %s: %w", node, err)
	}
	return mf, nil
}

// ContainerMetric is the value and timestamp of a per-container family
// (container_cpu_usage_seconds_total, container_memory_working_set_bytes)
// for one Pod's container.
func ContainerMetric(mf map[string]*dto.MetricFamily, family, ns, pod, container string) (float64, time.Time, bool) {
	f := mf[family]
	if f == nil {
		return 0, time.Time{}, false
	}
	for _, m := range f.GetMetric() {
		if !hasLabels(m, ns, pod, container) {
			continue
		}
		var v float64
		switch {
		case m.GetCounter() != nil:
			v = m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			v = m.GetGauge().GetValue()
		default:
			v = m.GetUntyped().GetValue()
		}
		return v, time.UnixMilli(m.GetTimestampMs()), true
	}
	return 0, time.Time{}, false
}

// hasLabels reports whether m is the series of that namespace, pod and
// container.
func hasLabels(m *dto.Metric, ns, pod, container string) bool {
	matched := 0
	for _, l := range m.GetLabel() {
		var want string
		switch l.GetName() {
		case "namespace":
			want = ns
		case "pod":
			want = pod
		case "container":
			want = container
		default:
			continue
		}
		if l.GetValue() != want {
			return false
		}
		matched++
	}
	return matched == 3
}

// node reads a node's resource metrics and Summary, once per summaryTTL.
func (k *Kube) node(ctx context.Context, node string) (cachedSummary, error) {
	k.mu.Lock()
	c, ok := k.summary[node]
	k.mu.Unlock()
	if ok && time.Since(c.at) < summaryTTL {
		return c, nil
	}
	mf, err := NodeMetrics(ctx, k.cs, node)
	if err != nil {
		return c, err
	}
	sum, err := NodeSummary(ctx, k.cs, node)
	if err != nil {
		return c, err
	}
	c = cachedSummary{time.Now(), sum, mf}
	k.mu.Lock()
	k.summary[node] = c
	k.mu.Unlock()
	return c, nil
}

// PodStats finds pod's entry in a node's summary.
func PodStats(s *stats.Summary, ns, pod string) (stats.PodStats, bool) {
	for _, p := range s.Pods {
		if p.PodRef.Namespace == ns && p.PodRef.Name == pod {
			return p, true
		}
	}
	return stats.PodStats{}, false
}

// workerContainer is the name of the worker's container in its Pod.
const workerContainer = "worker"

// Sample reads the worker's figures from its node's kubelet.
func (k *Kube) Sample(ctx context.Context, inst Instance) (score.Sample, error) {
	k.mu.Lock()
	lp := k.pods[inst.ID]
	k.mu.Unlock()
	node := lp.node
	if node == "" {
		return score.Sample{}, fmt.Errorf("stats %s: not a listed worker", inst.Name)
	}
	c, err := k.node(ctx, node)
	if err != nil {
		return score.Sample{}, fmt.Errorf("stats %s: %w", inst.Name, err)
	}
	cpu, at, ok := ContainerMetric(c.metrics, "container_cpu_usage_seconds_total", k.o.Namespace, inst.ID, workerContainer)
	if !ok {
		return score.Sample{}, fmt.Errorf("stats %s: the kubelet of %s has no figures for it yet", inst.Name, node)
	}
	s := score.Sample{At: at, CPUTotal: uint64(math.Round(cpu * 1e9)), CPULimit: inst.CPULimit, OnlineCPUs: k.nodeCPUs(ctx, node), MemLimit: lp.memLimit}
	// The working set is usage less the inactive page cache: what
	// score.Memory counts.
	if ws, _, ok := ContainerMetric(c.metrics, "container_memory_working_set_bytes", k.o.Namespace, inst.ID, workerContainer); ok && ws > 0 {
		s.MemUsage = uint64(ws)
	}
	if ps, ok := PodStats(c.sum, k.o.Namespace, inst.ID); ok && ps.Network != nil {
		if n := ps.Network; n.RxBytes != nil && n.TxBytes != nil {
			s.NetBytes = *n.RxBytes + *n.TxBytes
		}
	}
	return s, nil
}

func (k *Kube) nodeCPUs(ctx context.Context, node string) int {
	k.mu.Lock()
	n, ok := k.cpus[node]
	k.mu.Unlock()
	if ok {
		return n
	}
	nd, err := k.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return 1
	}
	n = max(1, int(nd.Status.Allocatable.Cpu().Value()))
	k.mu.Lock()
	k.cpus[node] = n
	k.mu.Unlock()
	return n
}
