package bld

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Labels and annotations the candidates use.
const (
	ElectionLabel       = "ringside.io/election"   // on candidate Pods: the election they take part in
	ProbeAnnotation     = "ringside.io/probe"      // on candidate Pods: host:port of the sidecar, for RTT probes and kicks
	SuccessorAnnotation = "ringside.io/successors" // on the lock object: the ranked followers, best first
)

// Locks.
const (
	LockLease     = "lease"
	LockEndpoints = "endpoints"
)

// CandidateConfig configures one replica's elector.
type CandidateConfig struct {
	Algorithm string
	Lock      string // lease or endpoints
	Election  string // lock object name; also the application's name in the leader record
	Namespace string
	Identity  string // the Pod name
	Node      string // "" → read from the Pod
	Client    kubernetes.Interface

	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// ProbeAddr is this candidate's sidecar address, published on its
	// Pod for the leader's RTT probes (ranked).
	ProbeAddr    string
	RankInterval time.Duration

	OnEvent func(event, leader string) // campaign, started, stopped, leader
	Log     *slog.Logger
}

// Candidate campaigns in one election with one of the algorithms.
type Candidate struct {
	cfg    CandidateConfig
	lock   resourcelock.Interface
	record *Record
	kick   chan struct{}
	hc     *http.Client

	mu      sync.Mutex
	leader  string
	ranking []Follower
	// The record as read ahead for this try (see ElectorConfig.Prefetch).
	ahead   *Snapshot
	aheadAt time.Time
	// The worker nodes, which change rarely.
	nodes   []string
	nodesAt time.Time
	// Live candidate Pods of this election, listed at most every retry
	// period.
	pods   []v1.Pod
	podsAt time.Time
}

// nodesTTL is how long the list of worker nodes is trusted.
const nodesTTL = 30 * time.Second

// Follower is a ranked follower with its median RTT to the leader.
type Follower struct {
	ID   string        `json:"id"`
	Addr string        `json:"addr"`
	RTT  time.Duration `json:"rtt_ns"`
}

// NewCandidate validates cfg and builds the lock.
func NewCandidate(cfg CandidateConfig) (*Candidate, error) {
	if err := CheckAlgorithm(cfg.Algorithm); err != nil {
		return nil, err
	}
	if cfg.Election == "" || cfg.Namespace == "" || cfg.Identity == "" {
		return nil, fmt.Errorf("candidate: election, namespace and identity are required (got %q, %q, %q)", cfg.Election, cfg.Namespace, cfg.Identity)
	}
	if cfg.LeaseDuration <= cfg.RenewDeadline || cfg.RenewDeadline <= cfg.RetryPeriod || cfg.RetryPeriod <= 0 {
		return nil, fmt.Errorf("candidate: want lease %s > renew deadline %s > retry period %s > 0", cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod)
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.RankInterval == 0 {
		cfg.RankInterval = time.Second
	}
	if cfg.OnEvent == nil {
		cfg.OnEvent = func(string, string) {}
	}
	meta := metav1.ObjectMeta{Name: cfg.Election, Namespace: cfg.Namespace}
	lc := resourcelock.ResourceLockConfig{Identity: cfg.Identity}
	c := &Candidate{cfg: cfg, kick: make(chan struct{}, 1), hc: &http.Client{Timeout: 300 * time.Millisecond},
		record: &Record{Client: cfg.Client.CoreV1(), Namespace: cfg.Namespace}}
	switch cfg.Lock {
	case LockLease, "":
		c.lock = &resourcelock.LeaseLock{LeaseMeta: meta, Client: cfg.Client.CoordinationV1(), LockConfig: lc}
	case LockEndpoints:
		c.lock = &EndpointsLock{EndpointsMeta: meta, Client: cfg.Client.CoreV1(), LockConfig: lc}
	default:
		return nil, fmt.Errorf("lock %q: want lease or endpoints", cfg.Lock)
	}
	return c, nil
}

// Leader returns the last known leader.
func (c *Candidate) Leader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

// Kick makes a waiting candidate try to acquire now.
func (c *Candidate) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *Candidate) setLeader(id string) {
	c.mu.Lock()
	c.leader = id
	c.mu.Unlock()
	c.cfg.OnEvent("leader", id)
}

// Run campaigns until ctx ends; a leader then releases the lease (ranked:
// hands it to the best-ranked live follower).
func (c *Candidate) Run(ctx context.Context) error {
	if err := c.publish(ctx); err != nil {
		return err
	}
	c.cfg.OnEvent("campaign", "")
	// Leadership ends when the leader context does: both electors cancel
	// it before they release the lease, and call OnStoppedLeading only
	// after, so a "stopped" sent from there could follow the successor's
	// "started" and look like two leaders at once.
	started := func(lctx context.Context) {
		c.mu.Lock()
		c.leader = c.cfg.Identity
		c.mu.Unlock()
		c.cfg.OnEvent("started", c.cfg.Identity)
		if Balanced(c.cfg.Algorithm) {
			c.confirmLoop(lctx)
		}
		if c.cfg.Algorithm == Ranked {
			c.rankLoop(lctx)
		}
		<-lctx.Done()
		c.cfg.OnEvent("stopped", "")
	}
	stopped := func() {
		if Balanced(c.cfg.Algorithm) {
			rctx, cancel := context.WithTimeout(context.Background(), c.cfg.RenewDeadline)
			defer cancel()
			c.record.Release(rctx, c.cfg.Election, c.cfg.Identity)
		}
	}
	if c.cfg.Algorithm == Default {
		// client-go's elector, unchanged; it returns after losing the
		// lease, so campaign again.
		for ctx.Err() == nil {
			le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
				Lock: freshLock{c.lock}, LeaseDuration: c.cfg.LeaseDuration, RenewDeadline: c.cfg.RenewDeadline,
				RetryPeriod: c.cfg.RetryPeriod, ReleaseOnCancel: true, Name: c.cfg.Election,
				Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: started, OnStoppedLeading: stopped, OnNewLeader: c.setLeader},
			})
			if err != nil {
				return err
			}
			le.Run(ctx)
		}
		return nil
	}
	cfg := ElectorConfig{
		Lock: c.lock, LeaseDuration: c.cfg.LeaseDuration, RenewDeadline: c.cfg.RenewDeadline, RetryPeriod: c.cfg.RetryPeriod,
		OnStartedLeading: started, OnStoppedLeading: stopped, OnNewLeader: c.setLeader, Kick: c.kick, Log: c.cfg.Log,
	}
	if Balanced(c.cfg.Algorithm) {
		cfg.Gate, cfg.AfterAttempt, cfg.Prefetch, cfg.Unclaimed = c.balanceGate, c.afterBalanced, c.readAhead, c.unclaimed
		cfg.GateRetry = c.cfg.RetryPeriod / 40
	}
	if c.cfg.Algorithm == Ranked {
		cfg.Gate, cfg.Handover = c.rankGate, c.handover
	}
	NewElector(cfg).Run(ctx)
	return nil
}

// publish finds this candidate's node and announces its probe address on
// its Pod.
func (c *Candidate) publish(ctx context.Context) error {
	pods := c.cfg.Client.CoreV1().Pods(c.cfg.Namespace)
	if c.cfg.Node == "" {
		pod, err := pods.Get(ctx, c.cfg.Identity, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("candidate %s: reading its Pod for the node name: %w", c.cfg.Identity, err)
		}
		c.cfg.Node = pod.Spec.NodeName
	}
	if c.cfg.ProbeAddr == "" || c.cfg.Algorithm != Ranked {
		return nil // only ranked leaders probe their followers
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{ProbeAnnotation: c.cfg.ProbeAddr}}})
	if _, err := pods.Patch(ctx, c.cfg.Identity, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("candidate %s: publishing the probe address: %w", c.cfg.Identity, err)
	}
	return nil
}

// Workers names the nodes BLD counts (N): the schedulable ones that are
// not control planes.
func Workers(nodes []v1.Node) []string {
	out := []string{}
	for _, n := range nodes {
		if _, cp := n.Labels["node-role.kubernetes.io/control-plane"]; !cp && !n.Spec.Unschedulable {
			out = append(out, n.Name)
		}
	}
	return out
}

// workerNodes are the Workers, listed at most every nodesTTL.
func (c *Candidate) workerNodes(ctx context.Context) ([]string, error) {
	c.mu.Lock()
	nodes, at := c.nodes, c.nodesAt
	c.mu.Unlock()
	if nodes != nil && time.Since(at) < nodesTTL {
		return nodes, nil
	}
	// ResourceVersion "0" lets the API server answer from its watch cache.
	// A consistent list (the default since Kubernetes 1.31) waits for the
	// cache to catch up with etcd, which on a quiet server takes up to the
	// cache's 100 ms progress-notify tick: that wait, not the request, was
	// most of BLD's extra election latency. Nodes change rarely.
	list, err := c.cfg.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	out := Workers(list.Items)
	c.mu.Lock()
	c.nodes, c.nodesAt = out, time.Now()
	c.mu.Unlock()
	return out, nil
}

// readAhead reads the record while the elector reads the lock (on a
// candidate's first try, before: see unclaimed), so a free lease costs
// BLD one round trip more than the default election (the reservation),
// not two. When the record shows that this candidate's node already
// holds another application's leader, it also lists what the balance
// condition then needs (the worker nodes, or the election's candidates);
// listing them for every candidate instead loads the API server at the
// busiest moment of a burst of elections.
func (c *Candidate) readAhead(ctx context.Context) {
	snap := c.record.Read(ctx)
	c.mu.Lock()
	c.ahead, c.aheadAt = &snap, time.Now()
	c.mu.Unlock()
	if p, err := snap.Placement(); err == nil && c.crowded(p) {
		c.balanceInputs(ctx) // an error shows again, and is reported, in qualifies
	}
}

// unclaimed reports whether the record, as read ahead, holds no entry
// for this election: nobody leads it or is reserving it, so its lock is
// most likely absent.
func (c *Candidate) unclaimed() bool {
	c.mu.Lock()
	ahead := c.ahead
	c.mu.Unlock()
	if ahead == nil {
		return false
	}
	p, err := ahead.Placement()
	_, claimed := p[c.cfg.Election]
	return err == nil && !claimed
}

// peers are the live candidate Pods of this election, listed at most
// every retry period.
func (c *Candidate) peers(ctx context.Context) ([]v1.Pod, error) {
	c.mu.Lock()
	pods, at := c.pods, c.podsAt
	c.mu.Unlock()
	if pods != nil && time.Since(at) < c.cfg.RetryPeriod {
		return pods, nil
	}
	// A consistent list, unlike the nodes': candidates start moments after
	// their Pods are created, and a peer missing from a lagging cache
	// would let bld-plus pass over the least-loaded candidate node.
	list, err := c.cfg.Client.CoreV1().Pods(c.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: ElectionLabel + "=" + c.cfg.Election})
	if err != nil {
		return nil, err
	}
	pods = slices.DeleteFunc(list.Items, func(p v1.Pod) bool { return p.DeletionTimestamp != nil })
	c.mu.Lock()
	c.pods, c.podsAt = pods, time.Now()
	c.mu.Unlock()
	return pods, nil
}

func (c *Candidate) balanceGate(ctx context.Context, observed *resourcelock.LeaderElectionRecord, _ time.Duration) (bool, error) {
	previous := ""
	if observed != nil {
		previous = observed.HolderIdentity
	}
	c.mu.Lock()
	ahead := c.ahead
	if time.Since(c.aheadAt) > time.Second {
		ahead = nil // read for an earlier try: a wasted compare-and-swap
	}
	c.ahead = nil // one use: a retry must read afresh
	c.mu.Unlock()
	return c.record.Reserve(ctx, ahead, c.cfg.Election, c.cfg.Identity, c.cfg.Node, previous, c.cfg.LeaseDuration, func(p Placement) (bool, error) {
		return c.qualifies(ctx, p)
	})
}

// qualifies evaluates the balance condition on p. A node that holds no
// other application's leader qualifies under every rule, whatever the
// worker nodes (bld, bld-literal) or the election's candidate nodes
// (bld-plus), so those are needed only when this node is crowded.
func (c *Candidate) qualifies(ctx context.Context, p Placement) (bool, error) {
	if !c.crowded(p) {
		return true, nil
	}
	nodes, cands, err := c.balanceInputs(ctx)
	if err != nil {
		return false, err
	}
	return Qualifies(c.cfg.Algorithm, c.cfg.Election, c.cfg.Node, p, nodes, cands), nil
}

// crowded reports whether this candidate's node holds another
// application's leader in p.
func (c *Candidate) crowded(p Placement) bool {
	return p.Counts(c.cfg.Election)[c.cfg.Node] > 0
}

// balanceInputs lists what the balance condition needs beside the
// record: the worker nodes (bld, bld-literal) or the nodes hosting a
// candidate of this election (bld-plus). Both are cached.
func (c *Candidate) balanceInputs(ctx context.Context) (nodes, cands []string, err error) {
	switch c.cfg.Algorithm {
	case BLD, BLDLiteral:
		nodes, err = c.workerNodes(ctx)
	case BLDPlus:
		cands, err = c.candidateNodes(ctx)
	}
	return nodes, cands, err
}

// candidateNodes are the nodes that host a live candidate of this
// election.
func (c *Candidate) candidateNodes(ctx context.Context) ([]string, error) {
	pods, err := c.peers(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods {
		if p.Spec.NodeName != "" && !slices.Contains(out, p.Spec.NodeName) {
			out = append(out, p.Spec.NodeName)
		}
	}
	return out, nil
}

// confirmLoop keeps this leader's entry in the record every retry period
// while it leads: a candidate that took the lease for expired by its own
// clock, reserved, and then lost the lease to this leader's renewal
// drops that reservation, and with it the application's entry.
func (c *Candidate) confirmLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.cfg.RetryPeriod):
		}
		if err := c.record.Confirm(ctx, c.cfg.Election, c.cfg.Identity, c.cfg.Node); err != nil && ctx.Err() == nil {
			c.cfg.Log.Warn("confirming the leader record failed", "err", err)
		}
	}
}

func (c *Candidate) afterBalanced(ctx context.Context, won bool) {
	if !won {
		if err := c.record.Release(ctx, c.cfg.Election, c.cfg.Identity); err != nil {
			c.cfg.Log.Debug("dropping the reservation failed", "err", err)
		}
	}
}

// Handler serves the sidecar API: GET / answers {"name":"<leader>"} like
// the 2016 leader-elector image; GET /healthz; GET /rtt is the probe the
// ranked leader times; POST /kick makes this candidate try to acquire at
// once (the leader calls it after handing the lease over).
func (c *Candidate) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"name": c.Leader()})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /rtt", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("POST /kick", func(w http.ResponseWriter, r *http.Request) {
		c.Kick()
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// successors reads the ranking the leader stored on the lock object.
func (c *Candidate) successors(ctx context.Context) ([]Follower, error) {
	var ann map[string]string
	switch l := c.lock.(type) {
	case *resourcelock.LeaseLock:
		lease, err := c.cfg.Client.CoordinationV1().Leases(c.cfg.Namespace).Get(ctx, c.cfg.Election, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil // no lock yet, so no ranking
		}
		if err != nil {
			return nil, err
		}
		ann = lease.Annotations
	case *EndpointsLock:
		ep, err := c.cfg.Client.CoreV1().Endpoints(l.EndpointsMeta.Namespace).Get(ctx, c.cfg.Election, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		ann = ep.Annotations
	}
	raw, ok := ann[SuccessorAnnotation]
	if !ok {
		return nil, nil
	}
	var out []Follower
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("%s annotation: %w", SuccessorAnnotation, err)
	}
	return out, nil
}

// Rank is a follower's place in line: its index in the ranking, or after
// everyone ranked when it is not listed.
func Rank(ranking []Follower, id string) int {
	if i := slices.IndexFunc(ranking, func(r Follower) bool { return r.ID == id }); i >= 0 {
		return i
	}
	return len(ranking)
}

// rankGate staggers takeover after expiry: the follower of rank k waits k
// retry periods, so the best-ranked live one wins without a stampede.
func (c *Candidate) rankGate(ctx context.Context, _ *resourcelock.LeaderElectionRecord, expired time.Duration) (bool, error) {
	ranking, err := c.successors(ctx)
	if err != nil {
		return false, err
	}
	return expired >= time.Duration(Rank(ranking, c.cfg.Identity))*c.cfg.RetryPeriod, nil
}

// rankLoop measures RTTs to the followers and publishes the ranking
// while this candidate leads.
func (c *Candidate) rankLoop(ctx context.Context) {
	for {
		ranking := c.measure(ctx)
		if ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		c.ranking = ranking
		c.mu.Unlock()
		if err := c.storeRanking(ctx, ranking); err != nil && ctx.Err() == nil {
			c.cfg.Log.Warn("storing the successor ranking failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.cfg.RankInterval):
		}
	}
}

// measure probes every follower's sidecar a few times and sorts them by
// median RTT; unreachable followers are left out.
func (c *Candidate) measure(ctx context.Context) []Follower {
	pods, err := c.peers(ctx)
	if err != nil {
		return nil
	}
	var out []Follower
	for _, p := range pods {
		addr := p.Annotations[ProbeAnnotation]
		if p.Name == c.cfg.Identity || addr == "" {
			continue
		}
		var rtts []time.Duration
		for range 5 {
			if d, err := c.probe(ctx, addr); err == nil {
				rtts = append(rtts, d)
			}
		}
		if len(rtts) == 0 {
			continue
		}
		slices.Sort(rtts)
		out = append(out, Follower{ID: p.Name, Addr: addr, RTT: rtts[len(rtts)/2]})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].RTT < out[j].RTT })
	return out
}

func (c *Candidate) probe(ctx context.Context, addr string) (time.Duration, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/rtt", nil)
	t0 := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return time.Since(t0), nil
}

func (c *Candidate) storeRanking(ctx context.Context, ranking []Follower) error {
	raw, _ := json.Marshal(ranking)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{SuccessorAnnotation: string(raw)}}})
	var err error
	switch c.lock.(type) {
	case *resourcelock.LeaseLock:
		_, err = c.cfg.Client.CoordinationV1().Leases(c.cfg.Namespace).Patch(ctx, c.cfg.Election, types.MergePatchType, patch, metav1.PatchOptions{})
	case *EndpointsLock:
		_, err = c.cfg.Client.CoreV1().Endpoints(c.cfg.Namespace).Patch(ctx, c.cfg.Election, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	return err
}

// handover picks the best-ranked follower that still answers and, once
// the lease names it, kicks it so it takes over at once instead of at its
// next retry.
func (c *Candidate) handover(ctx context.Context) (string, func()) {
	c.mu.Lock()
	ranking := slices.Clone(c.ranking)
	c.mu.Unlock()
	for _, r := range ranking {
		if _, err := c.probe(ctx, r.Addr); err != nil {
			continue
		}
		return r.ID, func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+r.Addr+"/kick", nil)
			if resp, err := c.hc.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}
	return "", nil
}
