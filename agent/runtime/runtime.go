// Package runtime runs and observes worker instances for the agent:
// Docker containers through the Engine SDK, or local processes (stats from
// /proc) so the testbed works on a machine without Docker.
package runtime

import (
	"fmt"
	"strconv"
	"strings"
)

// Labels mark what the agent manages; containers are found by label,
// never by name.
const (
	LabelRole    = "ringside.role"
	RoleWorker   = "worker"
	LabelDefault = "ringside.default"
	LabelPool    = "ringside.pool" // separates concurrent stacks on one engine
	// LabelName is the worker's name (what it answers with in X-Worker)
	// where the container's name carries the pool too.
	LabelName = "ringside.worker"
)

// Instance is one running worker.
type Instance struct {
	ID       string  // container or process ID
	Name     string  // human name
	Addr     string  // host:port that serves HTTP
	Default  bool    // default workers are never terminated
	CPULimit float64 // CPUs it may use (0: unlimited)
}

// Spec describes a worker to start.
type Spec struct {
	Name     string
	Default  bool
	CPULimit float64 // CPUs (Docker NanoCPUs; the process worker throttles itself)
	MemoryMB int     // Docker memory limit; 0 none
}

// ParseSpecs reads "cpu[:default]" items, e.g. "0.5:default,1,0.25": one
// worker per item.
func ParseSpecs(s string) ([]Spec, error) {
	var out []Spec
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		cpu, flag, _ := strings.Cut(item, ":")
		v, err := strconv.ParseFloat(cpu, 64)
		if err != nil || !(v > 0) || v > 64 {
			return nil, fmt.Errorf("worker %d %q: CPU limit must be a number in (0, 64]", i+1, item)
		}
		if flag != "" && flag != "default" {
			return nil, fmt.Errorf("worker %d %q: want CPU[:default]", i+1, item)
		}
		out = append(out, Spec{CPULimit: v, Default: flag == "default"})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("workers %q: none given", s)
	}
	return out, nil
}
