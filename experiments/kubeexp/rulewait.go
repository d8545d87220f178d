package kubeexp

import (
	"slices"
	"strings"
	"time"

	"github.com/ringside/ringside/bld/balance"
	"github.com/ringside/ringside/experiments/backend/kube"
)

// ruleWaits is, per application of namespace ns, how long after its first
// candidate's campaign start alg's placement rule (balance.Qualifies)
// first admitted one of its campaigning candidates, given where the other
// applications' leaders were at that moment by their started and stopped
// events. No implementation of the rule could have elected sooner than
// that in this repetition, with these start times and the other
// leaders where they went; the default and ranked admit at once (0). An
// application no candidate of which the rule admitted has no entry.
//
// A leader counts from its "started" event, a little after its Lease was
// written; the elections themselves judge by the writes' order, so this
// is the rule as an observer who learns each leader when it starts
// applies it.
func ruleWaits(alg, ns string, events []kube.Event, podNode map[string]string, nodes []string) map[string]time.Duration {
	events = kube.SortByTime(events)
	firstCampaign := map[string]time.Time{} // application → its first campaign start
	for _, e := range events {
		if e.Event == "campaign" {
			if _, ok := firstCampaign[e.Election]; !ok {
				firstCampaign[e.Election] = e.TS
			}
		}
	}
	out := map[string]time.Duration{}
	for election, first := range firstCampaign {
		leaders := balance.Placement{}  // other elections → their leader's node
		leaderID := map[string]string{} // and → their leader
		var candidates []string         // nodes of this election's candidates campaigning so far
		for _, e := range events {
			switch {
			case e.Election == election && e.Event == "campaign":
				candidates = append(candidates, podNode[e.ID])
			case e.Election != election && e.Event == "started":
				leaders[e.Election], leaderID[e.Election] = podNode[e.ID], e.ID
			case e.Election != election && (e.Event == "stopped" || e.Event == "killed") && leaderID[e.Election] == e.ID:
				delete(leaders, e.Election)
				delete(leaderID, e.Election)
			default:
				continue
			}
			if e.TS.Before(first) {
				continue
			}
			if slices.ContainsFunc(candidates, func(node string) bool {
				return balance.Qualifies(alg, election, node, leaders, nodes, candidates)
			}) {
				out[strings.TrimPrefix(election, ns+"/")] = e.TS.Sub(first)
				break
			}
		}
	}
	return out
}
