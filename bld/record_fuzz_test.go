package bld

import (
	"encoding/json"
	"testing"
	"time"

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
		}
		var e Entry
		decodes := json.Unmarshal([]byte(raw), &e) == nil
		got, kept := out[app]
		switch {
		case app == "other":
		case decodes && !e.expired(at):
			if !kept || !got.Time.Equal(e.Time) || got.Node != e.Node || got.Holder != e.Holder || !got.Expires.Equal(e.Expires) {
				t.Fatalf("entry %q = %+v, want %+v", app, got, e)
			}
		case kept:
			t.Fatalf("entry %q (%q) kept though it does not decode or has expired", app, raw)
		}
	})
}
