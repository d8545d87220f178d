package server

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	requests    *prometheus.CounterVec
	sent        *prometheus.CounterVec
	malformed   *prometheus.CounterVec
	dropped     prometheus.Counter
	replFail    prometheus.Counter
	moveRetries prometheus.Counter
	won         prometheus.Counter
	coordinator prometheus.Gauge
	metaVersion prometheus.Gauge
	unleased    prometheus.Counter
	// The serving lease's frames, among sent's types: counted apart
	// from the lookup by label, n·(n−1) of them a heartbeat.
	leaseAsks, leaseAnswers prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ringnode_kv_requests_total",
			Help: "Key-value requests by operation and HTTP status."}, []string{"op", "code"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ringnode_ring_messages_sent_total",
			Help: "Ring protocol messages sent, by type."}, []string{"type"}),
		malformed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ringnode_malformed_total",
			Help: "Rejected malformed input, by source."}, []string{"source"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "ringnode_foreign_messages_dropped_total",
			Help: "Ring messages from servers outside the current ring."}),
		replFail: prometheus.NewCounter(prometheus.CounterOpts{Name: "ringnode_replication_failures_total",
			Help: "Writes a replica did not acknowledge."}),
		moveRetries: prometheus.NewCounter(prometheus.CounterOpts{Name: "ringnode_data_move_retries_total",
			Help: "Data moves that failed and were retried."}),
		won: prometheus.NewCounter(prometheus.CounterOpts{Name: "ringnode_elections_won_total",
			Help: "Elections this server won."}),
		coordinator: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ringnode_coordinator",
			Help: "1 while this server is the coordinator."}),
		metaVersion: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ringnode_metadata_version",
			Help: "Version of the ring metadata in force."}),
		unleased: prometheus.NewCounter(prometheus.CounterOpts{Name: "ringnode_unleased_refusals_total",
			Help: "Requests refused as owner for want of a serving lease from a majority of the ring."}),
	}
	m.leaseAsks, m.leaseAnswers = m.sent.WithLabelValues("lease_ask"), m.sent.WithLabelValues("lease_answer")
	reg.MustRegister(m.requests, m.sent, m.malformed, m.dropped, m.replFail, m.moveRetries, m.won, m.coordinator, m.metaVersion, m.unleased)
	return m
}
