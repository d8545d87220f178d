package loadreport

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHeaderRoundTrip(t *testing.T) {
	r := Report{RIF: 7, LatencyMS: 12.5, QPS: 340.25, EPS: 1.5, Utilization: 0.875}
	got, err := ParseHeader(r.HeaderValue())
	require.NoError(t, err)
	assert.Equal(t, r, got)

	// Other ORCA metrics are ignored; order does not matter.
	got, err = ParseHeader("TEXT mem_utilization=0.8, eps=2, rps_fractional=10, cpu_utilization=0.5, named_metrics.foo=1")
	require.NoError(t, err)
	assert.Equal(t, Report{QPS: 10, EPS: 2, Utilization: 0.5}, got)
}

func TestHostileHeaders(t *testing.T) {
	for _, tc := range []struct{ v, want string }{
		{"", "TEXT format"},
		{"JSON {}", "TEXT format"},
		{"TEXT cpu_utilization", "not name=value"},
		{"TEXT cpu_utilization=NaN", "utilization"},
		{"TEXT cpu_utilization=-1", "utilization"},
		{"TEXT rps_fractional=1e400", "not a number"},
		{"TEXT eps=1, eps=2", "eps twice"},
		{"TEXT named_metrics.rif=1.5", "rif"},
		{"TEXT named_metrics.rif=-3", "rif"},
		{"TEXT named_metrics.latency_ms=Inf", "latency_ms"},
		{"TEXT " + strings.Repeat("x=1, ", 9) + "x=1", ""},
		{"TEXT eps=1,", "not name=value"},
	} {
		_, err := ParseHeader(tc.v)
		if tc.want == "" {
			assert.NoError(t, err, tc.v)
			continue
		}
		assert.ErrorContains(t, err, tc.want, tc.v)
	}
}

func TestDecode(t *testing.T) {
	r, err := Decode([]byte(`{"rif":3,"latency_ms":2.5,"qps":10,"eps":0,"utilization":0.5}`))
	require.NoError(t, err)
	assert.Equal(t, 2500*time.Microsecond, r.Latency())
	for _, bad := range []string{`{"rif":-1}`, `{"qps":"x"}`, `[]`, `{"utilization":1e9}`, ``} {
		_, err := Decode([]byte(bad))
		assert.ErrorContains(t, err, "load report", bad)
	}
}

// A header that parses is in range, and prints and parses back to the
// same report within the six significant digits it is printed with.
func FuzzParseHeader(f *testing.F) {
	f.Add(Report{RIF: 1, LatencyMS: 2, QPS: 3, EPS: 4, Utilization: 0.5}.HeaderValue())
	f.Add("TEXT eps=1, eps=2")
	f.Add("TEXT cpu_utilization=0x1p-2, named_metrics.rif=+4")
	f.Fuzz(func(t *testing.T, v string) {
		r, err := ParseHeader(v)
		if err != nil {
			return
		}
		if err := r.Check(); err != nil {
			t.Fatalf("parsed an out-of-range report %+v: %v", r, err)
		}
		again, err := ParseHeader(r.HeaderValue())
		if err != nil {
			t.Fatalf("its own header %q does not parse: %v", r.HeaderValue(), err)
		}
		for _, pair := range [][2]float64{{r.QPS, again.QPS}, {r.EPS, again.EPS}, {r.Utilization, again.Utilization}, {r.LatencyMS, again.LatencyMS}} {
			if math.Abs(pair[0]-pair[1]) > 1e-5*math.Abs(pair[0]) {
				t.Fatalf("%v printed and parsed back as %v", pair[0], pair[1])
			}
		}
		if again.RIF != r.RIF {
			t.Fatalf("rif %d came back %d", r.RIF, again.RIF)
		}
	})
}

// A /load document that decodes encodes and decodes to itself.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"rif":3,"latency_ms":2.5,"qps":10,"eps":0,"utilization":0.5}`))
	f.Add([]byte(`{"rif":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			return
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Decode(out)
		if err != nil || again != r {
			t.Fatalf("%s → %+v → %s → %+v, %v", b, r, out, again, err)
		}
	})
}

func TestMeter(t *testing.T) {
	m := NewMeter(func() float64 { return 1e6 })
	t0 := time.Unix(1000, 0)
	assert.Equal(t, 0, m.Begin())
	assert.Equal(t, 1, m.Begin())
	assert.Equal(t, int64(2), m.Report(t0).RIF)
	m.End(t0.Add(100*time.Millisecond), 10*time.Millisecond, false, 0)
	m.End(t0.Add(200*time.Millisecond), 10*time.Millisecond, true, 1)
	r := m.Report(t0.Add(300 * time.Millisecond))
	assert.Equal(t, int64(0), r.RIF)
	assert.Zero(t, r.QPS, "the second is not over")
	assert.InDelta(t, 10, r.LatencyMS, 0.5)

	r = m.Report(t0.Add(1100 * time.Millisecond))
	assert.Equal(t, 2.0, r.QPS, "the last complete second")
	assert.Equal(t, 1.0, r.EPS)
	assert.GreaterOrEqual(t, r.Utilization, 0.0)
	assert.Less(t, r.Utilization, 1e-3, "CPU time per 10⁶ CPUs")
	assert.Zero(t, m.Report(t0.Add(3*time.Second)).QPS, "an idle second after")
	assert.Positive(t, CPUCapacity())
}

func TestLatencyByRIF(t *testing.T) {
	var l LatencyByRIF
	assert.Zero(t, l.Estimate(3))
	l.Add(0, 0, 10*time.Millisecond)
	assert.Equal(t, 10*time.Millisecond, l.Estimate(0))
	assert.Equal(t, 40*time.Millisecond, l.Estimate(3), "scaled from the nearest level below: a queue of 3 ahead")
	l.Add(0, 4, 80*time.Millisecond)
	assert.Equal(t, 80*time.Millisecond, l.Estimate(4))
	assert.Equal(t, 40*time.Millisecond, l.Estimate(3), "still from below")
	assert.Equal(t, 1024*time.Millisecond, l.Estimate(1000), "levels from 63 up are one: 80 ms × 64/5")
	var hi LatencyByRIF
	hi.Add(0, 9, 100*time.Millisecond)
	assert.Equal(t, 10*time.Millisecond, hi.Estimate(0), "from above when nothing is below")
	// Time-weighted: after one time constant the old value keeps e^-1.
	l.Add(time.Second, 0, 0)
	assert.InDelta(t, 10e6*0.36788, float64(l.Estimate(0)), 1e3)
}
