package kubeexp

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRequestCounts(t *testing.T) {
	raw := []byte(`# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",resource="leases",verb="GET"} 10
apiserver_request_total{code="409",resource="leases",verb="PUT"} 2
apiserver_request_total{code="200",resource="leases",verb="PUT"} 5
apiserver_request_total{code="201",resource="leasecandidates",verb="POST"} 3
apiserver_request_total{code="200",resource="secrets",verb="GET"} 99
`)
	before, err := parseRequestCounts(raw)
	require.NoError(t, err)
	assert.Equal(t, 7.0, before[[2]string{"leases", "PUT"}], "codes add up")
	all, writes := before.sub(counts{})
	assert.Equal(t, 20.0, all, "secrets are no election's")
	assert.Equal(t, 10.0, writes)

	// Only that family is read: other families, a look-alike name and a
	// line the parser would refuse elsewhere leave it alone.
	mixed, err := parseRequestCounts([]byte("apiserver_request_duration_seconds_bucket{le=\"0.1\"} 3\nnot a metric line {\n" +
		"apiserver_request_total_other{resource=\"leases\",verb=\"GET\"} 50\n" + string(raw)))
	require.NoError(t, err)
	assert.Equal(t, before, mixed)

	for _, bad := range []string{"", "garbage{", "# TYPE apiserver_request_total counter\napiserver_request_total{verb=\"GET\"} x\n", "other_total 1\n", "apiserver_request_total{resource=\"leases\",verb=\"GET\"} NaN\n",
		"apiserver_request_total{resource=\"leases\",verb=\"GET\",code=\"1\"} 1e308\napiserver_request_total{resource=\"leases\",verb=\"GET\",code=\"2\"} 1e308\n"} {
		_, err := parseRequestCounts([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

// Whatever the API server's /metrics hold, the counts are finite.
func FuzzParseRequestCounts(f *testing.F) {
	f.Add([]byte("apiserver_request_total{resource=\"leases\",verb=\"GET\"} 1\n"))
	f.Add([]byte("apiserver_request_total{resource=\"leases\",verb=\"GET\"} NaN\napiserver_request_total{resource=\"leases\",verb=\"GET\"} +Inf\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := parseRequestCounts(raw)
		if err != nil {
			return
		}
		for k, v := range c {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%v: %v", k, v)
			}
		}
	})
}
