package agent

import (
	"encoding/json"
	"reflect"
	"testing"
)

// A snapshot read from Redis is either refused or one the agent could have
// written: every worker passes check under its own ID, and saving it
// again reads back the same snapshot.
func FuzzDecodeSnapshot(f *testing.F) {
	f.Add("2", "w1", `{"id":"w1","state":"low","cpu_limit":0.5,"weight":0.3,"response_ms":[1.5,2]}`)
	f.Add("1", "w1", `{"id":"w1","state":"sundown","since_unix_ms":-1}`)
	f.Add("9223372036854775807", "w1", `{"id":"w1"}`)
	f.Add("-1", "", `{}`)
	f.Add("0", "w1", `{"id":"w2","state":"low"}`)
	f.Add("0", "w1", `{"id":"w1","score":1e308,"avail_score":-1e308}`)
	f.Fuzz(func(t *testing.T, desired, id, raw string) {
		s, err := decodeSnapshot("p", desired, map[string]string{id: raw})
		if err != nil {
			return
		}
		if s.Desired < 0 || s.Desired > maxStoredWorkers || len(s.Workers) != 1 {
			t.Fatalf("accepted desired %d with %d workers", s.Desired, len(s.Workers))
		}
		w := s.Workers[0]
		if err := w.check(id); err != nil {
			t.Fatalf("accepted a worker that fails its check: %v", err)
		}
		b, err := json.Marshal(w)
		if err != nil {
			t.Fatalf("an accepted worker does not encode: %v", err)
		}
		again, err := decodeSnapshot("p", desired, map[string]string{w.ID: string(b)})
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("saved and read back: %+v, %v; want %+v", again, err, s)
		}
	})
}
