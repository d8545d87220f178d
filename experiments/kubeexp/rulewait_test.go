package kubeexp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ringside/ringside/bld/balance"
	"github.com/ringside/ringside/experiments/backend/kube"
)

func TestRuleWaitsIsTheRulesRefusalFromTheFirstCampaign(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ev := func(ms int, event, pod, app string) kube.Event {
		return kube.Event{TS: at(ms), Event: event, ID: "ns/" + pod, Election: "ns/" + app}
	}
	nodes := []string{"n1", "n2", "n3"}
	podNode := map[string]string{"ns/a-0": "n1", "ns/a-1": "n2", "ns/b-0": "n1", "ns/b-1": "n2", "ns/c-0": "n1"}
	// a leads on n1 from 10 ms; b's first candidate, on n1, campaigns at
	// 12 (3·1 > 1: refused), its second, on n2, at 20; c's only
	// candidate sits on n1 beside a's leader for good.
	events := []kube.Event{
		ev(20, "campaign", "b-1", "b"), // out of order: the function sorts
		ev(5, "campaign", "a-0", "a"),
		ev(10, "started", "a-0", "a"),
		ev(12, "campaign", "b-0", "b"),
		ev(14, "campaign", "c-0", "c"),
		ev(30, "started", "b-1", "b"),
	}
	got := ruleWaits(balance.BLDOptimistic, "ns", events, podNode, nodes)
	assert.Equal(t, map[string]time.Duration{"a": 0, "b": 8 * time.Millisecond}, got, "c is never admitted: 3·1 > 2")

	// The default admits every candidate at its campaign start; bld-plus
	// a candidate alone on its application's nodes.
	assert.Equal(t, map[string]time.Duration{"a": 0, "b": 0, "c": 0}, ruleWaits(balance.Default, "ns", events, podNode, nodes))
	assert.Equal(t, map[string]time.Duration{"a": 0, "b": 0, "c": 0}, ruleWaits(balance.BLDPlus, "ns", events, podNode, nodes))

	// A leader that stops frees its node from then on; a stop of a
	// candidate that does not lead changes nothing.
	stopped := append(events, ev(13, "stopped", "a-1", "a"), ev(16, "stopped", "a-0", "a"))
	got = ruleWaits(balance.BLD, "ns", stopped, podNode, nodes)
	assert.Equal(t, map[string]time.Duration{"a": 0, "b": 4 * time.Millisecond, "c": 2 * time.Millisecond}, got,
		"b-0 and c-0 qualify once a's leader stopped, not at a-1's stop")
}
