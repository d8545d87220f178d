package balance

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

var nodes3 = []string{"w1", "w2", "w3"}

func TestBLDRuleMatchesTable1(t *testing.T) {
	// Three applications on three nodes: BLD must end 1:1:1.
	p := Placement{}
	assert.True(t, Qualifies(BLD, "a", "w1", p, nodes3, nil), "first leader anywhere")
	p["a"] = "w1"
	assert.False(t, Qualifies(BLD, "b", "w1", p, nodes3, nil))
	assert.True(t, Qualifies(BLD, "b", "w2", p, nodes3, nil))
	p["b"] = "w2"
	assert.False(t, Qualifies(BLD, "c", "w1", p, nodes3, nil), "N·c = 3 > L = 2")
	assert.True(t, Qualifies(BLD, "c", "w3", p, nodes3, nil))
	assert.True(t, Qualifies(BLDLiteral, "c", "w1", p, nodes3, nil), "literal c ≤ (L+1)/N = 1 allows 2:1:0")
	assert.True(t, Qualifies(BLD, "a", "w1", p, nodes3, nil), "an application's own leader does not count against it")
}

func TestBalanceNeverExceedsOneForAnyArrivalOrder(t *testing.T) {
	// Greedy arrivals: each application takes the first qualifying node
	// in a rotating order; BLD keeps max−min ≤ 1 for any count.
	for apps := 1; apps <= 9; apps++ {
		for start := range 3 {
			p := Placement{}
			for i := range apps {
				app := fmt.Sprint("app", i)
				for k := range 3 {
					node := nodes3[(start+i+k)%3]
					if Qualifies(BLD, app, node, p, nodes3, nil) {
						p[app] = node
						break
					}
				}
				assert.Contains(t, p, app, "%d apps: someone qualifies", apps)
			}
			c := p.Counts("")
			lo, hi := apps, 0
			for _, n := range nodes3 {
				lo, hi = min(lo, c[n]), max(hi, c[n])
			}
			assert.LessOrEqual(t, hi-lo, 1, "%d apps from %d", apps, start)
		}
	}
}

func TestBLDPlusAlwaysHasAQualifiedCandidate(t *testing.T) {
	// The constrained scenario: the app's replicas sit on w1 and w2 only,
	// both already hold more leaders than w3.
	p := Placement{"a": "w1", "b": "w2", "x": "w1", "y": "w2"}
	cands := []string{"w1", "w2"}
	assert.False(t, Qualifies(BLD, "c", "w1", p, nodes3, cands))
	assert.False(t, Qualifies(BLD, "c", "w2", p, nodes3, cands), "BLD leaves c without a leader")
	assert.True(t, Qualifies(BLDPlus, "c", "w1", p, nodes3, cands))
	assert.True(t, Qualifies(BLDPlus, "c", "w2", p, nodes3, cands))
	p["z"] = "w1"
	assert.False(t, Qualifies(BLDPlus, "c", "w1", p, nodes3, cands), "only the least-loaded candidate node")
	assert.True(t, Qualifies(BLDPlus, "c", "w2", p, nodes3, cands))
	assert.True(t, Qualifies(Default, "c", "w1", p, nodes3, cands))
	assert.ErrorContains(t, CheckAlgorithm("raft"), `"raft"`)
}

// The candidate lists nodes and peers only for a node that holds another
// application's leader; that shortcut is sound only if an empty node
// qualifies under every rule, whatever the nodes and candidates.
func TestEmptyNodeAlwaysQualifies(t *testing.T) {
	p := Placement{"x": "w1", "y": "w1", "z": "w2", "a": "w3"}
	for _, alg := range Algorithms {
		for _, nodes := range [][]string{nil, nodes3, {"w1", "w2", "w3", "w4", "w5"}} {
			for _, cands := range [][]string{nil, {"w1"}, {"w1", "w2", "w4"}} {
				assert.True(t, Qualifies(alg, "a", "w4", p, nodes, cands), "%s, nodes %v, candidates %v", alg, nodes, cands)
			}
		}
	}
}
