package bld

import (
	"encoding/json"
	"net/http"
)

// The sidecar API the application container and the ranked leader use.

// Handler serves the sidecar API: GET / answers {"name":"<leader>"} like
// the 2016 leader-elector image, with "term" beside it once the leader's
// term is known (the lock record's leaderTransitions: see term.go); GET /healthz; GET /rtt is the probe the
// ranked leader times; POST /kick makes this candidate try to acquire at
// once (the leader calls it after handing the lease over).
func (c *Candidate) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		leader, term, ok := c.LeaderTerm()
		ans := map[string]any{"name": leader}
		if ok {
			ans["term"] = term
		}
		json.NewEncoder(w).Encode(ans)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /rtt", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("POST /kick", func(w http.ResponseWriter, r *http.Request) {
		c.Kick()
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}
