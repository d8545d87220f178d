package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/wire"
)

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
	// sent's series, resolved at start: a lookup by label hashes the
	// label, and its first use builds the series — a server's first
	// ELECTED paid that before its forward's write. Every series exists,
	// at 0, from the start.
	sentType                [wire.MsgHeartbeatAck + 1]prometheus.Counter // by ring.MsgType; nil for none
	hopAcks, resent         prometheus.Counter
	leaseAsks, leaseAnswers prometheus.Counter // n·(n−1) of each a heartbeat
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
	for _, t := range ring.MsgTypes {
		m.sentType[t] = m.sent.WithLabelValues(typeName(t))
	}
	m.sentType[wire.MsgHeartbeatAck] = m.sent.WithLabelValues(typeName(wire.MsgHeartbeatAck))
	m.hopAcks, m.resent = m.sent.WithLabelValues("hop_ack"), m.sent.WithLabelValues("retransmission")
	m.leaseAsks, m.leaseAnswers = m.sent.WithLabelValues("lease_ask"), m.sent.WithLabelValues("lease_answer")
	reg.MustRegister(m.requests, m.sent, m.malformed, m.dropped, m.replFail, m.moveRetries, m.won, m.coordinator, m.metaVersion, m.unleased)
	return m
}

// sentOf returns the series of sent messages of type t.
func (m *metrics) sentOf(t ring.MsgType) prometheus.Counter {
	if int(t) < len(m.sentType) && m.sentType[t] != nil {
		return m.sentType[t]
	}
	return m.sent.WithLabelValues(typeName(t))
}
