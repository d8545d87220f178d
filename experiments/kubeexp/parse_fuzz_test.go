package kubeexp

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

const leaseLine = `apiserver_request_total{code="200",component="apiserver",group="coordination.k8s.io",resource="leases",scope="resource",verb="PUT",version="v1"} 42`

// What parseRequestCounts accepts are counts — finite, not negative —
// and lines of other families, which it skips, change nothing.
func FuzzParseRequestCounts(f *testing.F) {
	for _, s := range []string{
		"# HELP apiserver_request_total Counter of apiserver requests.\n# TYPE apiserver_request_total counter\n" + leaseLine + "\n",
		leaseLine + "\n" + leaseLine + "\n",
		`apiserver_request_total{resource="leases",verb="GET"} -3` + "\n",
		`apiserver_request_total{resource="leases",verb="GET"} 1e308` + "\n" + `apiserver_request_total{resource="leases",verb="GET",code="500"} 1e308` + "\n",
		`apiserver_request_total{resource="leases"} NaN`,
		"apiserver_request_total_sum 3\n",
		"garbage",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := parseRequestCounts(raw)
		if err != nil {
			return
		}
		for k, v := range c {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("%v: %v is no count", k, v)
			}
		}
		other := append([]byte("# TYPE process_open_fds gauge\nprocess_open_fds 7\napiserver_request_total_other 9\n"), raw...)
		c2, err := parseRequestCounts(other)
		if err != nil || len(c2) != len(c) {
			t.Fatalf("another family's lines changed the reading: %v, %v", c2, err)
		}
		for k, v := range c {
			if c2[k] != v {
				t.Fatalf("another family's lines changed %v: %v, was %v", k, c2[k], v)
			}
		}
	})
}

// What parseApplied accepts is a write with a key, and the line leaderapp
// would log for that write reads the same.
func FuzzParseApplied(f *testing.F) {
	for _, s := range []string{
		`{"ts_ns":1700000000000000000,"key":"k","term":2,"vterm":2,"seq":5,"as":"leader","leader":"app-0"}`,
		`{"ts_ns":-1,"key":"k","seq":18446744073709551615,"term":-9223372036854775808,"as":"follower"}`,
		`{"key":""}`, `{"key":"k","seq":-1}`, `{"level":"INFO","msg":"started"}`, `null`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		w, ok := parseApplied(line, "app-1")
		if !ok {
			return
		}
		if w.Key == "" || w.Replica != "app-1" {
			t.Fatalf("%q read as %+v", line, w)
		}
		as := "follower"
		if w.AsLeader {
			as = "leader"
		}
		var again bytes.Buffer
		if err := json.NewEncoder(&again).Encode(map[string]any{"ts_ns": w.At.UnixNano(), "key": w.Key, "term": w.Term, "seq": w.Seq, "as": as, "leader": w.Leader}); err != nil {
			t.Fatal(err)
		}
		if w2, ok := parseApplied(again.Bytes(), "app-1"); !ok || w2 != w {
			t.Fatalf("%q read as %+v, its own line %q as %+v", line, w, again.Bytes(), w2)
		}
	})
}
