package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/wire"
)

// Every type of sent message has its series from the start, and the
// series resolved at start are the ones the label names.
func TestSentSeriesExistFromTheStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	types := map[string]bool{}
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != "ringnode_ring_messages_sent_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			assert.Zero(t, s.GetCounter().GetValue())
			types[s.GetLabel()[0].GetValue()] = true
		}
	}
	for _, name := range []string{"election", "elected", "end", "heartbeat", "heartbeat_ack", "hop_ack", "retransmission", "lease_ask", "lease_answer"} {
		assert.True(t, types[name], "no series for %s at start", name)
	}

	for i, typ := range append([]ring.MsgType{wire.MsgHeartbeatAck}, ring.MsgTypes...) {
		for range i + 1 {
			m.sentOf(typ).Inc()
		}
		assert.Equal(t, float64(i+1), counter(m.sent.WithLabelValues(typeName(typ))), typeName(typ))
	}
	// A type with no series resolved at start (the lease frames have
	// counters of their own) is looked up by the label typeName gives it.
	m.sentOf(wire.MsgLeaseAsk).Inc()
	assert.Equal(t, 1.0, counter(m.sent.WithLabelValues(typeName(wire.MsgLeaseAsk))))
}
