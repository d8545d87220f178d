package bld

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

// The leader record is read from a ConfigMap anyone with access may edit:
// whatever an entry holds, decoding keeps exactly the entries that decode
// and have not expired, unchanged, and leaves the others out.
func FuzzDecodeEntries(f *testing.F) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	good, _ := json.Marshal(Entry{Node: "worker-1", Holder: "app-0", Time: now, Expires: now.Add(time.Minute)})
	f.Add("app", string(good), int64(0))
	f.Add("app", `{"node":"w","expires":"1970-01-01T00:00:00Z"}`, int64(0))
	f.Add("", `{"node":7}`, int64(1))
	f.Add("app", `{"expires":"9999-12-31T23:59:59Z"}`, int64(-1))
	f.Fuzz(func(t *testing.T, app, raw string, skew int64) {
		at := now.Add(time.Duration(skew))
		cm := &v1.ConfigMap{Data: map[string]string{app: raw, "other": string(good)}}
		out := decodeEntries(cm, nil, at)
		for name, e := range out {
			if _, ok := cm.Data[name]; !ok {
				t.Fatalf("entry %q appeared from nowhere", name)
			}
			if e.expired(at) {
				t.Fatalf("entry %q expired at %s is kept", name, e.Expires)
			}
			if e.Expires.After(at.Add(entryLife * MaxLease)) {
				t.Fatalf("entry %q claims its node until %s, past any candidate's reach", name, e.Expires)
			}
		}
		var e Entry
		decodes := json.Unmarshal([]byte(raw), &e) == nil
		got, kept := out[app]
		switch {
		case app == "other":
		case decodes && !e.expired(at) && !e.Expires.After(at.Add(entryLife*MaxLease)):
			if !kept || !got.Time.Equal(e.Time) || got.Node != e.Node || got.Holder != e.Holder || !got.Expires.Equal(e.Expires) {
				t.Fatalf("entry %q = %+v, want %+v", app, got, e)
			}
		case kept:
			t.Fatalf("entry %q (%q) kept though it does not decode or has expired", app, raw)
		}
	})
}

// A follower's probe address is followed only when it is the Pod's own:
// an annotation pointing elsewhere (any host, a service of the cluster)
// is refused.
func TestProbeAddrIsThePodsOwn(t *testing.T) {
	pod := func(addr string, ips ...string) *v1.Pod {
		p := &v1.Pod{}
		p.Name = "app-1"
		p.Annotations = map[string]string{ProbeAnnotation: addr}
		for _, ip := range ips {
			p.Status.PodIPs = append(p.Status.PodIPs, v1.PodIP{IP: ip})
		}
		return p
	}
	for _, tc := range []struct {
		p    *v1.Pod
		want string // "" for refused
	}{
		{pod("10.244.1.5:4040", "10.244.1.5"), "10.244.1.5:4040"},
		{pod("10.96.0.1:443", "10.244.1.5"), ""},
		{pod("127.0.0.1:4040", "10.244.1.5"), ""},
		{pod("127.0.0.1:4040"), "127.0.0.1:4040"}, // no kubelet: the process backend
		{pod("10.0.0.9:4040"), ""},
		{pod("metadata.internal:80", "10.244.1.5"), ""},
		{pod("10.244.1.5:0", "10.244.1.5"), ""},
		{pod("10.244.1.5", "10.244.1.5"), ""},
	} {
		got, err := probeAddr(tc.p)
		if tc.want == "" {
			assert.Error(t, err, tc.p.Annotations[ProbeAnnotation])
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, got)
	}
}
