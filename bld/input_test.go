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

// The Endpoints lock's record is an annotation anyone who may edit the
// object writes: what decodes is a record client-go could have written —
// a holder of at most 253 bytes, no negative count — and encoding it
// again decodes to the same record.
func FuzzDecodeLockRecord(f *testing.F) {
	f.Add(`{"holderIdentity":"app-0","leaseDurationSeconds":10,"acquireTime":"2026-11-24T12:00:00.000000Z","renewTime":"2026-11-24T12:00:05.000000Z","leaderTransitions":3}`)
	f.Add(`{"holderIdentity":"","leaseDurationSeconds":-1}`)
	f.Add(`{"leaderTransitions":-2147483648}`)
	f.Add(`{"renewTime":"9999-12-31T23:59:59.999999999Z"}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, raw string) {
		rec, err := decodeLockRecord(raw)
		if err != nil {
			return
		}
		if len(rec.HolderIdentity) > 253 || rec.LeaseDurationSeconds < 0 || rec.LeaderTransitions < 0 {
			t.Fatalf("accepted %+v", rec)
		}
		b, err := json.Marshal(rec)
		if err != nil {
			return // a time past year 9999 decodes but does not encode: Update then fails, naming it
		}
		again, err := decodeLockRecord(string(b))
		require.NoError(t, err, "re-encoded %s", b)
		b2, _ := json.Marshal(again)
		require.Equal(t, string(b), string(b2), "encode ∘ decode is stable")
	})
}

// The ranking annotation: what decodes names each follower once, with no
// negative RTT and no more than maxRanked of them, and reads back the
// same once written.
func FuzzDecodeRanking(f *testing.F) {
	good, _ := json.Marshal([]Follower{{ID: "app-1", Addr: "10.0.0.2:4040", RTT: 250 * time.Microsecond}, {ID: "app-2", Addr: "10.0.0.3:4040", RTT: time.Millisecond}})
	f.Add(string(good))
	f.Add(`[{"id":"a"},{"id":"a"}]`)
	f.Add(`[{"id":"a","rtt_ns":-1}]`)
	f.Add(`[{"id":""}]`)
	f.Add(`[{"id":"a","rtt_ns":9223372036854775807}]`)
	f.Fuzz(func(t *testing.T, raw string) {
		out, err := decodeRanking(raw)
		if err != nil {
			return
		}
		require.LessOrEqual(t, len(out), maxRanked)
		seen := map[string]bool{}
		for _, r := range out {
			require.False(t, r.ID == "" || seen[r.ID] || r.RTT < 0, "accepted %+v", r)
			seen[r.ID] = true
			assert.Equal(t, seen[r.ID], Rank(out, r.ID) < len(out))
		}
		b, err := json.Marshal(out)
		require.NoError(t, err)
		again, err := decodeRanking(string(b))
		require.NoError(t, err)
		if len(out) > 0 {
			require.Equal(t, out, again)
		}
	})
}
