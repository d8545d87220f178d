// Package catalog assembles every experiment ringside ships, in the order
// `ringside list` prints them and `ringside run all` runs them.
package catalog

import (
	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/kubeexp"
	"github.com/ringside/ringside/experiments/lbexp"
	"github.com/ringside/ringside/experiments/ringnet"
	"github.com/ringside/ringside/experiments/ringsim"
)

// New returns a fresh registry (experiments keep their flag values, so
// each run gets its own).
func New() *experiments.Registry {
	r := &experiments.Registry{}
	r.Register(&ringsim.Messages{})
	r.Register(&ringsim.Chaos{})
	r.Register(&ringsim.FailoverSim{})
	r.Register(&ringnet.Failover{})
	r.Register(&ringnet.Join{})
	r.Register(&ringnet.KVLoad{})
	r.Register(&ringnet.KVChaos{})
	r.Register(&kubeexp.Distribution{})
	r.Register(&kubeexp.Latency{})
	r.Register(&kubeexp.Reelection{})
	r.Register(&kubeexp.Rebalance{})
	r.Register(&kubeexp.LeaseTradeoff{})
	r.Register(&kubeexp.SplitBrain{})
	r.Register(&kubeexp.ThroughputRole{})
	r.Register(&kubeexp.ThroughputPlacement{})
	r.Register(&lbexp.Efficiency{})
	r.Register(&lbexp.Sim{})
	r.Register(&lbexp.Live{})
	r.Register(&lbexp.Proxy{})
	return r
}
