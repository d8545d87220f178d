package balancer

import "github.com/prometheus/client_golang/prometheus"

var (
	descRequests = prometheus.NewDesc("balancer_requests_total", "Requests sent to a worker (each retry counts).", []string{"worker"}, nil)
	descFailures = prometheus.NewDesc("balancer_worker_failures_total", "Attempts a worker did not answer.", []string{"worker"}, nil)
	descActive   = prometheus.NewDesc("balancer_active_requests", "Requests in flight to a worker.", []string{"worker"}, nil)
	descWeight   = prometheus.NewDesc("balancer_worker_weight", "A worker's weight in the current table.", []string{"worker"}, nil)
	descFeed     = prometheus.NewDesc("balancer_feed_messages_total", "Weight feed messages by outcome.", []string{"outcome"}, nil)
)

// Describe and Collect make the balancer a Prometheus collector, so the
// per-worker series follow the table without registration bookkeeping.
func (b *Balancer) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRequests, descFailures, descActive, descWeight, descFeed} {
		ch <- d
	}
}

func (b *Balancer) Collect(ch chan<- prometheus.Metric) {
	for _, w := range b.Tally("").Workers {
		ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(w.Requests), w.ID)
		ch <- prometheus.MustNewConstMetric(descFailures, prometheus.CounterValue, float64(w.Failures), w.ID)
		ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, float64(w.Active), w.ID)
	}
	for _, w := range b.Workers() {
		ch <- prometheus.MustNewConstMetric(descWeight, prometheus.GaugeValue, w.Weight, w.ID)
	}
	ch <- prometheus.MustNewConstMetric(descFeed, prometheus.CounterValue, float64(b.feedAccepted.Load()), "accepted")
	ch <- prometheus.MustNewConstMetric(descFeed, prometheus.CounterValue, float64(b.feedRejected.Load()), "rejected")
}
