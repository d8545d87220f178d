package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The kubelet's resource metrics as /metrics/resource serves them: the
// series of exactly one namespace, pod and container, with its own
// millisecond timestamp; a pod-level series (no container label), a
// same-named pod elsewhere or a missing family is not it.
func TestContainerMetricPicksTheSeries(t *testing.T) {
	const text = `# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="worker",namespace="a",pod="w-1"} 12.5 1795744059651
container_cpu_usage_seconds_total{container="worker",namespace="b",pod="w-1"} 99 1795744059000
container_cpu_usage_seconds_total{container="sidecar",namespace="a",pod="w-1"} 7 1795744059000
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="worker",namespace="a",pod="w-1"} 2.5e+06 1795744060637
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="a",pod="w-1"} 13 1795744070880
`
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(strings.NewReader(text))
	require.NoError(t, err)
	v, at, ok := ContainerMetric(mf, "container_cpu_usage_seconds_total", "a", "w-1", "worker")
	require.True(t, ok)
	assert.Equal(t, 12.5, v)
	assert.Equal(t, time.UnixMilli(1795744059651), at, "the kubelet's own timestamp, to the millisecond")
	ws, _, ok := ContainerMetric(mf, "container_memory_working_set_bytes", "a", "w-1", "worker")
	require.True(t, ok)
	assert.Equal(t, 2.5e6, ws)
	_, _, ok = ContainerMetric(mf, "pod_cpu_usage_seconds_total", "a", "w-1", "worker")
	assert.False(t, ok, "a pod-level series has no container")
	_, _, ok = ContainerMetric(mf, "container_cpu_usage_seconds_total", "c", "w-1", "worker")
	assert.False(t, ok)
	_, _, ok = ContainerMetric(mf, "no_such_family", "a", "w-1", "worker")
	assert.False(t, ok)
}
