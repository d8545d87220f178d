// Package loadreport is how a worker tells balancers how loaded it is: a
// Meter on the worker's request path, and the report it produces — in the
// ORCA "endpoint-load-metrics" response header on every response (gRPC
// A58's per-call reports, which wrr-reports weighs by) and as JSON on the
// worker's /load endpoint (what prequal's probes read).
package loadreport

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Header is ORCA's per-call load report header for HTTP.
const Header = "Endpoint-Load-Metrics"

// Report is a worker's load.
type Report struct {
	// RIF is its requests in flight.
	RIF int64 `json:"rif"`
	// LatencyMS is its recent request latency (an EWMA, milliseconds).
	LatencyMS float64 `json:"latency_ms"`
	// QPS and EPS are the requests and errors per second it served over
	// the last second; Utilization its CPU use over that second as a
	// fraction of the CPUs it may use (its cgroup quota when it has one).
	QPS         float64 `json:"qps"`
	EPS         float64 `json:"eps"`
	Utilization float64 `json:"utilization"`
}

// Latency is LatencyMS as a duration.
func (r Report) Latency() time.Duration {
	return time.Duration(r.LatencyMS * float64(time.Millisecond))
}

// Check names the first field out of range.
func (r Report) Check() error {
	switch {
	case r.RIF < 0 || r.RIF > 1<<40:
		return fmt.Errorf("rif %d: outside 0…2⁴⁰", r.RIF)
	case !finite(r.LatencyMS) || r.LatencyMS < 0 || r.LatencyMS > 1e9:
		return fmt.Errorf("latency_ms %v: outside 0…10⁹", r.LatencyMS)
	case !finite(r.QPS) || r.QPS < 0 || r.QPS > 1e12:
		return fmt.Errorf("qps %v: outside 0…10¹²", r.QPS)
	case !finite(r.EPS) || r.EPS < 0 || r.EPS > 1e12:
		return fmt.Errorf("eps %v: outside 0…10¹²", r.EPS)
	case !finite(r.Utilization) || r.Utilization < 0 || r.Utilization > 1e3:
		return fmt.Errorf("utilization %v: outside 0…1000", r.Utilization)
	}
	return nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Decode parses and checks a /load document.
func Decode(b []byte) (Report, error) {
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return Report{}, fmt.Errorf("load report: %w", err)
	}
	if err := r.Check(); err != nil {
		return Report{}, fmt.Errorf("load report: %w", err)
	}
	return r, nil
}

// HeaderValue is the report in ORCA's TEXT form. RIF and latency travel as
// named metrics.
func (r Report) HeaderValue() string {
	return fmt.Sprintf("TEXT cpu_utilization=%s, rps_fractional=%s, eps=%s, named_metrics.rif=%d, named_metrics.latency_ms=%s",
		num(r.Utilization), num(r.QPS), num(r.EPS), r.RIF, num(r.LatencyMS))
}

func num(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }

var errHeader = errors.New("endpoint-load-metrics")

// ParseHeader parses a TEXT endpoint-load-metrics value. Unknown metrics
// are ignored (ORCA has more than a balancer reads); a known one that is
// malformed, repeated or out of range is an error naming it.
func ParseHeader(v string) (Report, error) {
	body, ok := strings.CutPrefix(v, "TEXT ")
	if !ok {
		return Report{}, fmt.Errorf("%w: want the TEXT format, got %.20q", errHeader, v)
	}
	var r Report
	seen := map[string]bool{}
	for _, field := range strings.Split(body, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(field), "=")
		if !ok {
			return Report{}, fmt.Errorf("%w: %.40q is not name=value", errHeader, field)
		}
		var dst *float64
		switch name {
		case "cpu_utilization":
			dst = &r.Utilization
		case "rps_fractional":
			dst = &r.QPS
		case "eps":
			dst = &r.EPS
		case "named_metrics.latency_ms":
			dst = &r.LatencyMS
		case "named_metrics.rif":
		default:
			continue
		}
		if seen[name] {
			return Report{}, fmt.Errorf("%w: %s twice", errHeader, name)
		}
		seen[name] = true
		if dst == nil {
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return Report{}, fmt.Errorf("%w: rif %.20q: not an integer", errHeader, val)
			}
			r.RIF = n
			continue
		}
		x, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return Report{}, fmt.Errorf("%w: %s %.20q: not a number", errHeader, name, val)
		}
		*dst = x
	}
	if err := r.Check(); err != nil {
		return Report{}, fmt.Errorf("%w: %w", errHeader, err)
	}
	return r, nil
}
