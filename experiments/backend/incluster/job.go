// Package incluster runs experiments from inside a Kubernetes cluster,
// where the Pods' IPs are reachable (the ring experiments' kubernetes
// backend needs that): `ringside cluster` on the host (Run) creates a
// namespace with a least-privilege ServiceAccount and a Job from the
// runner image, follows its log, and copies its results — CSVs,
// meta.json, report and figures — into the host's results folder, read
// through the API server's Pod proxy, so any cluster the kubeconfig
// reaches works; `ringside job` in the Pod (Job) runs the command line and
// serves the results until the host has them.
package incluster

import (
	"encoding/json"
	"net/http"
	"sync"
)

// JobPort is where the Job's Pod serves its status and results.
const JobPort = 8080

// Status is what GET /status answers.
type Status struct {
	Done  bool   `json:"done"`
	Error string `json:"error,omitempty"` // the run's, when it failed
}

// Job is the Pod's side: the results folder and the run's status.
type Job struct {
	Dir string

	mu sync.Mutex
	st Status
}

// Finish records the run's end (err nil: it succeeded).
func (j *Job) Finish(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.st.Done = true
	if err != nil {
		j.st.Error = err.Error()
	}
}

func (j *Job) status() Status {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.st
}

// Handler serves GET /status and, once the run is done, GET /results.tar
// (Pack of Dir).
func (j *Job) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(j.status())
	})
	mux.HandleFunc("GET /results.tar", func(w http.ResponseWriter, r *http.Request) {
		if !j.status().Done {
			http.Error(w, "the run is not done", http.StatusConflict)
			return
		}
		w.Header().Set("Content-Type", "application/x-tar")
		// A failure half-way cuts the stream; the host's Unpack reports
		// the truncated archive.
		Pack(w, j.Dir)
	})
	return mux
}
