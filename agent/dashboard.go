package agent

import (
	_ "embed"
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

//go:embed dashboard.html
var dashboardHTML []byte

// Handler serves the dashboard (/), its data (/api/state, and
// /api/history for its time plots), the weight
// feed (/feed), /healthz and /metrics.
func (a *Agent) Handler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'")
		w.Write(dashboardHTML)
	})
	mux.HandleFunc("GET /api/state", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(a.View())
	})
	mux.HandleFunc("GET /api/history", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(a.History())
	})
	mux.Handle("/feed", a.feed)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	if reg != nil {
		reg.MustRegister(a)
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	}
	return mux
}

var (
	descScore  = prometheus.NewDesc("agent_worker_score", "Worker score (100 = idle and healthy).", []string{"worker"}, nil)
	descWeight = prometheus.NewDesc("agent_worker_weight", "Weight sent to the balancers.", []string{"worker"}, nil)
	descState  = prometheus.NewDesc("agent_worker_state", "1 for the worker's current lifecycle state.", []string{"worker", "state"}, nil)
	descEvents = prometheus.NewDesc("agent_events", "Lifecycle events kept in memory, by kind.", []string{"kind"}, nil)
)

func (a *Agent) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descScore, descWeight, descState, descEvents} {
		ch <- d
	}
}

func (a *Agent) Collect(ch chan<- prometheus.Metric) {
	v := a.View()
	for _, w := range v.Workers {
		ch <- prometheus.MustNewConstMetric(descScore, prometheus.GaugeValue, w.Score, w.Name)
		ch <- prometheus.MustNewConstMetric(descWeight, prometheus.GaugeValue, w.Weight, w.Name)
		ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, 1, w.Name, w.State)
	}
	kinds := map[string]int{}
	for _, e := range v.Events {
		kinds[e.Kind]++
	}
	for k, n := range kinds {
		ch <- prometheus.MustNewConstMetric(descEvents, prometheus.GaugeValue, float64(n), k)
	}
}
