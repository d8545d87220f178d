// Package balance is the Balanced Leader Distribution rule of seeds 000
// and 001 and the names of the elections bld runs: a pure function of the
// leader-management record, the nodes and the candidates, shared by the
// elector and the experiments that check its placements.
package balance

import (
	"fmt"
	"slices"
)

// Algorithms.
const (
	Default    = "default"
	BLD        = "bld"
	BLDLiteral = "bld-literal"
	BLDPlus    = "bld-plus"
	// BLDOptimistic is BLD's rule with the acquisition turned round: take
	// the lease first, then check the node against the elections the API
	// server committed before, in the order a watch delivers them,
	// releasing the lease at once when the node does not qualify. Its
	// record is the namespace's Leases, each naming its holder's node.
	BLDOptimistic = "bld-optimistic"
	Ranked        = "ranked"
	// CLEBalanced campaigns through Kubernetes' coordinated leader
	// election: the candidate registers and leads when the
	// ringside.io/balanced strategy controller names it (bld/strategy).
	CLEBalanced = "cle-balanced"
)

// Algorithms lists every algorithm name, for flag validation.
var Algorithms = []string{Default, BLD, BLDLiteral, BLDPlus, BLDOptimistic, Ranked, CLEBalanced}

// Balanced reports whether alg is of the BLD family: it places leaders
// by a leader-management record.
func Balanced(alg string) bool {
	return alg == BLD || alg == BLDLiteral || alg == BLDPlus || alg == BLDOptimistic
}

// CheckAlgorithm returns an error naming the valid algorithms.
func CheckAlgorithm(alg string) error {
	if slices.Contains(Algorithms, alg) {
		return nil
	}
	return fmt.Errorf("algorithm %q: want one of %v", alg, Algorithms)
}

// Placement maps each application to the node of its leader (the paper's
// leader-management record).
type Placement map[string]string

// Counts returns, per node, the leaders of applications other than app.
func (p Placement) Counts(app string) map[string]int {
	c := map[string]int{}
	for a, node := range p {
		if a != app && node != "" {
			c[node]++
		}
	}
	return c
}

// Qualifies decides whether a candidate of app running on node may take
// the lease under alg, given where the other applications' leaders are.
// nodes are the schedulable worker nodes (N = len(nodes)); candidates are
// the nodes that host a live candidate of app (for bld-plus).
//
//   - bld and bld-optimistic: with L leaders of other applications and c of them on node,
//     qualify iff N·c ≤ L, i.e. c < (L+1)/N (DESIGN §3.2);
//   - bld-literal: the paper's text read literally, c ≤ (L+1)/N, which
//     allows 2:1:0 for three applications on three nodes;
//   - bld-plus: qualify iff node holds the fewest leaders among the nodes
//     hosting a candidate of app, so some candidate always qualifies;
//   - default, ranked and cle-balanced (whose controller decides): always.
func Qualifies(alg, app, node string, p Placement, nodes, candidates []string) bool {
	counts := p.Counts(app)
	c := counts[node]
	l := 0
	for _, v := range counts {
		l += v
	}
	n := len(nodes)
	switch alg {
	case BLD, BLDOptimistic:
		return n == 0 || n*c <= l
	case BLDLiteral:
		return n == 0 || float64(c) <= float64(l+1)/float64(n)
	case BLDPlus:
		least := c
		for _, cn := range candidates {
			least = min(least, counts[cn])
		}
		return c == least
	}
	return true
}
