package kubeexp

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ringside/ringside/bld/balance"
	"github.com/ringside/ringside/experiments/backend/kube"
)

// spreadResult is one repetition of applications deployed side by side.
type spreadResult struct {
	perNode  map[string]int // leaders per worker node
	elected  int
	overlaps int
	// per application: ms from the first candidate's launch, from the
	// first candidate's campaign start, and from the leader's own
	// campaign start, to the leader's start
	launch, campaign, own map[string]time.Duration
	// cle-balanced: from the leader's own campaign start until the
	// controller named it (its Lease's acquireTime, written by the
	// controller): the rest, to the leader's start, is that write and its
	// watch event.
	named map[string]time.Duration
	// How many of the application's candidates began their campaign
	// before its leader did: 0 when the first to campaign won.
	before map[string]int
	// From the application's first candidate's campaign start to its
	// last's.
	spread map[string]time.Duration
	// How long after the first campaign start the algorithm's placement
	// rule first admitted a campaigning candidate (ruleWaits); read only
	// under measure.
	ruleWait map[string]time.Duration
	// --campaign-together: the leader's start after the instant every
	// candidate was held to (the harness's clock against the candidates').
	afterInstant map[string]time.Duration
	// Whether the candidate launched first was the first to campaign;
	// absent where the backend does not launch candidates one by one.
	launchOrder map[string]bool
	apps        []string // every application, elected or not
	// The API server's requests on election objects from the deployment
	// until every application led (its own count, apiserver_request_total;
	// the Pods' creation left out), and the writes among them; NaN when
	// not counted.
	requests, writes float64
}

// imbalance is the leaders of the fullest node less the emptiest's, over
// nodes.
func (r spreadResult) imbalance(nodes []string) int {
	if len(nodes) == 0 {
		return 0
	}
	lo, hi := r.perNode[nodes[0]], r.perNode[nodes[0]]
	for _, n := range nodes[1:] {
		lo, hi = min(lo, r.perNode[n]), max(hi, r.perNode[n])
	}
	return hi - lo
}

// spread deploys n applications of replicas each over the workers, all
// at once, and waits for their leaders; with measure (kube-election-latency),
// it also reads cle-balanced's naming times, times the placement rule's
// wait and counts the API requests they took (two scrapes of the API
// server's metrics). together > 0 holds every candidate's campaign until
// that long after the deployment began.
func spread(ctx context.Context, c *kube.Cluster, alg, lock string, n, replicas int, t kube.Timing, settle time.Duration, measure bool, together time.Duration) (spreadResult, error) {
	ns, err := c.Namespace(ctx, "spread")
	if err != nil {
		return spreadResult{}, err
	}
	defer c.StopNamespace(ns)
	var campaignAt time.Time
	if together > 0 {
		campaignAt = time.Now().Add(together)
	}
	var apps []kube.App
	var names []string
	for i := range n {
		name := fmt.Sprintf("app-%d", i)
		apps = append(apps, kube.App{Name: name, Replicas: replicas, Nodes: c.WorkerNodes, CampaignAt: campaignAt})
		names = append(names, name)
	}
	var before counts
	if measure {
		if before, err = requestCounts(ctx, c); err != nil {
			return spreadResult{}, err
		}
	}
	podNode, err := c.Deploy(ctx, ns, apps, 0, alg, lock, t)
	if err != nil {
		return spreadResult{}, err
	}
	// Held candidates try nothing before their instant: --settle counts
	// from it (a 60-s hold on kind elected no one within a 20-s settle
	// counted from the deployment).
	limit := settle
	if !campaignAt.IsZero() {
		limit += max(0, time.Until(campaignAt))
	}
	leaders, err := waitLeaders(ctx, c, ns, names, limit)
	if err != nil {
		return spreadResult{}, err
	}
	res := spreadResult{perNode: map[string]int{}, elected: len(leaders), launch: map[string]time.Duration{}, campaign: map[string]time.Duration{}, own: map[string]time.Duration{}, named: map[string]time.Duration{}, before: map[string]int{}, spread: map[string]time.Duration{}, afterInstant: map[string]time.Duration{}, launchOrder: map[string]bool{}, apps: names,
		requests: math.NaN(), writes: math.NaN()}
	if measure {
		after, err := requestCounts(ctx, c)
		if err != nil {
			return spreadResult{}, err
		}
		res.requests, res.writes = after.sub(before)
		created := after[[2]string{"pods", "POST"}] - before[[2]string{"pods", "POST"}]
		res.requests, res.writes = res.requests-created, res.writes-created
	}
	for _, id := range leaders {
		res.perNode[podNode[id]]++
	}
	var acquired map[string]acquisition // read only under measure
	if measure {
		if acquired, err = acquisitions(ctx, c, ns, alg); err != nil {
			return spreadResult{}, err
		}
	}
	events := c.Events(ns)
	res.overlaps = kube.Overlaps(events)
	if measure {
		res.ruleWait = ruleWaits(alg, ns, events, podNode, c.WorkerNodes)
	}
	for app, id := range leaders {
		// Each candidate's launch and campaign start, and the leader's start.
		launchedAt, campaignedAt := map[string]time.Time{}, map[string]time.Time{}
		var started time.Time
		for _, e := range events {
			if e.Election != ns+"/"+app {
				continue
			}
			switch e.Event {
			case "launched":
				keepEarliest(launchedAt, e.ID, e.TS)
			case "campaign":
				keepEarliest(campaignedAt, e.ID, e.TS)
			case "started":
				if e.ID == id && started.IsZero() {
					started = e.TS
				}
			}
		}
		firstLaunched, firstCampaign, ownCampaign := earliest(launchedAt), earliest(campaignedAt), campaignedAt[id]
		res.launch[app], res.campaign[app], res.own[app] = started.Sub(launchedAt[firstLaunched]), started.Sub(campaignedAt[firstCampaign]), started.Sub(ownCampaign)
		last := campaignedAt[firstCampaign]
		for _, ts := range campaignedAt {
			if ts.Before(ownCampaign) {
				res.before[app]++
			}
			if ts.After(last) {
				last = ts
			}
		}
		res.spread[app] = last.Sub(campaignedAt[firstCampaign])
		if !campaignAt.IsZero() {
			res.afterInstant[app] = started.Sub(campaignAt)
		}
		if len(launchedAt) > 1 {
			res.launchOrder[app] = firstLaunched == firstCampaign
		}
		// The naming that made this start, not a later one (a renewal lost
		// on a loaded machine, named again): then it is unknown.
		if t, ok := acquired[app]; ok && t.holder == strings.TrimPrefix(id, ns+"/") && !t.at.After(started) {
			res.named[app] = t.at.Sub(ownCampaign)
		}
	}
	return res, nil
}

// keepEarliest records t for id in ts unless an earlier time is there.
func keepEarliest(ts map[string]time.Time, id string, t time.Time) {
	if old, ok := ts[id]; !ok || t.Before(old) {
		ts[id] = t
	}
}

// earliest is the key of the earliest time in ts, the smallest key of
// equal ones ("" when empty).
func earliest(ts map[string]time.Time) string {
	var first string
	for k, t := range ts {
		if first == "" || t.Before(ts[first]) || t.Equal(ts[first]) && k < first {
			first = k
		}
	}
	return first
}

// acquisition is a Lease's holder and when it was named holder.
type acquisition struct {
	holder string
	at     time.Time
}

// acquisitions reads, for cle-balanced, when the controller named each
// election's holder (the Lease's acquireTime, by the controller's clock:
// it writes the holder with that time); nothing for the other algorithms,
// whose candidates take the Lease themselves.
func acquisitions(ctx context.Context, c *kube.Cluster, ns, alg string) (map[string]acquisition, error) {
	out := map[string]acquisition{}
	if alg != balance.CLEBalanced {
		return out, nil
	}
	list, err := c.CS.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the Leases of %s: %w", ns, err)
	}
	for _, l := range list.Items {
		if l.Spec.HolderIdentity != nil && l.Spec.AcquireTime != nil {
			out[l.Name] = acquisition{holder: *l.Spec.HolderIdentity, at: l.Spec.AcquireTime.Time}
		}
	}
	return out, nil
}

// constrained pins five applications to single nodes so that the leaders
// stand 2:2:1 with worker-3 the least loaded, then starts an application
// whose replicas sit on worker-1 and worker-2 only. BLD has no qualifying
// candidate for it (N·c = 6 > L = 5); BLD-plus does.
func constrained(ctx context.Context, c *kube.Cluster, alg, lock string, replicas int, t kube.Timing, settle time.Duration) (spreadResult, error) {
	w := c.WorkerNodes
	if len(w) != 3 {
		return spreadResult{}, fmt.Errorf("the constrained placement is built for the paper's three worker nodes, the cluster has %d", len(w))
	}
	ns, err := c.Namespace(ctx, "constrained")
	if err != nil {
		return spreadResult{}, err
	}
	defer c.StopNamespace(ns)
	res := spreadResult{perNode: map[string]int{}}
	pin := []string{w[0], w[1], w[2], w[0], w[1]}
	podNode := map[string]string{}
	for i, node := range pin {
		app := kube.App{Name: fmt.Sprintf("pinned-%d", i), Replicas: replicas, Nodes: []string{node}}
		pn, err := c.Deploy(ctx, ns, []kube.App{app}, 0, alg, lock, t)
		if err != nil {
			return res, err
		}
		for k, v := range pn {
			podNode[k] = v
		}
		got, err := waitLeaders(ctx, c, ns, []string{app.Name}, settle)
		if err != nil {
			return res, err
		}
		if len(got) != 1 {
			return res, fmt.Errorf("%s: pinned application %s elected no leader", alg, app.Name)
		}
	}
	x := kube.App{Name: "two-nodes", Replicas: replicas, Nodes: w[:2]}
	pn, err := c.Deploy(ctx, ns, []kube.App{x}, 0, alg, lock, t)
	if err != nil {
		return res, err
	}
	var xs []string // its candidates
	for k, v := range pn {
		podNode[k] = v
		xs = append(xs, k)
	}
	names := []string{x.Name}
	for i := range pin {
		names = append(names, fmt.Sprintf("pinned-%d", i))
	}
	// The pinned leaders stand still, so an algorithm whose rule refused
	// every candidate of x, and refused each again a retry period later,
	// has starved x: waiting out settle (10 s by default, in every
	// repetition) would show nothing more.
	leaders, err := waitLeadersUnless(ctx, c, ns, names, settle, func() bool { return starved(c.Events(ns), xs, t.Retry) })
	if err != nil {
		return res, err
	}
	res.elected = len(leaders)
	for _, id := range leaders {
		res.perNode[podNode[id]]++
	}
	res.overlaps = kube.Overlaps(c.Events(ns))
	return res, nil
}
