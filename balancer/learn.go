package balancer

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/ringside/ringside/balancer/pick"
	"github.com/ringside/ringside/internal/loadreport"
)

// What the learning pickers hear from the workers besides latencies: load
// reports on responses (wrr-reports) and probe answers (prequal).

// reported feeds a response's load report to the worker's Load; a
// malformed one is logged and changes nothing.
func (b *Balancer) reported(up upstream, header string) {
	if header == "" {
		return
	}
	r, err := loadreport.ParseHeader(header)
	if err != nil {
		b.log.Debug("load report refused", "worker", up.ID, "err", err)
		return
	}
	up.c.Reported(b.now(), pick.LoadReport{QPS: r.QPS, EPS: r.EPS, Utilization: r.Utilization}, b.tuning.ErrorPenalty, b.tuning.Expiry)
}

// maxProbes bounds the probes in flight; past it a probe is skipped
// (prequal then has fewer, older probes, never a stalled request).
const maxProbes = 64

// probe sends the probes the picker asks for, asynchronously: GET /load on
// each upstream, the answer reported back with Probed.
func (b *Balancer) probe(t *table, pr pick.Prober) {
	var buf [16]int
	for _, i := range pr.TakeProbes(buf[:0], rand.Uint64()) {
		select {
		case b.probes <- struct{}{}:
		default:
			continue
		}
		go func() {
			defer func() { <-b.probes }()
			r, err := b.getLoad(t.upstreams[i].Addr)
			if err != nil {
				b.log.Debug("probe failed", "worker", t.upstreams[i].ID, "err", err)
				return
			}
			pr.Probed(i, r.RIF, r.Latency())
		}()
	}
}

func (b *Balancer) getLoad(addr string) (loadreport.Report, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/load", nil)
	if err != nil {
		return loadreport.Report{}, err
	}
	resp, err := b.probeClient.Do(req)
	if err != nil {
		return loadreport.Report{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return loadreport.Report{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return loadreport.Report{}, fmt.Errorf("probe %s: %s", addr, resp.Status)
	}
	return loadreport.Decode(body)
}
