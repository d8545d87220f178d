package bld

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"

	"github.com/ringside/ringside/bld/balance"
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

// MaxCampaignWait bounds CandidateConfig.CampaignAt: an experiment's
// candidates all start within seconds, and an instant further ahead is a
// mistake (a clock, a unit) that would hold the election back unseen.
const MaxCampaignWait = 10 * time.Minute

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

	// CampaignAt holds the campaign back until this instant by Clock
	// (zero: at once). An experiment starts every candidate first and
	// lets them campaign together, to time the elections without the
	// platform's start-up spread: on kind an application's containers
	// start seconds apart, and BLD's rule waits for one on a node it
	// admits.
	CampaignAt time.Time

	OnEvent func(event, leader string) // campaign, started, stopped (leader: the successor it handed to, if any), leader, refused
	Log     *slog.Logger
	// Clock is every decision's time — retries, renewals, the record's
	// ages, caches, ranking rounds and RTTs (nil: the real one). The
	// default algorithm is client-go's elector, which keeps its own.
	Clock clock.WithTicker
}

// Candidate campaigns in one election with one of the algorithms.
type Candidate struct {
	cfg    CandidateConfig
	lock   annotatedLock
	record *Record
	kick   chan struct{}
	hc     *http.Client

	mu     sync.Mutex
	leader string
	// The holder and leaderTransitions of the last lock record read or
	// written (termLock).
	recHolder string
	recTerm   int
	recSeen   bool
	renewedAt time.Time // this candidate's last write of a record naming it, by its clock
	leading   bool      // between the electors' started and the end of its leadership
	// announceMu orders the "started" and "stopped" events with the write
	// that gives the lease up (endLeadership); announced is true between them.
	announceMu sync.Mutex
	announced  bool
	ledOn      time.Time // coordinated: the Lease renewal it last led on before renewing (lead)
	ranking    []Follower
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
	// The coordinated Lease as last seen (cle-balanced).
	lease *coordinationv1.Lease
	// bld-optimistic's lock and its picture of the namespace.
	nodeLock *trackedLeaseLock
	view     *view
}

// NewCandidate validates cfg and builds the lock.
func NewCandidate(cfg CandidateConfig) (*Candidate, error) {
	if err := balance.CheckAlgorithm(cfg.Algorithm); err != nil {
		return nil, err
	}
	if cfg.Election == "" || cfg.Namespace == "" || cfg.Identity == "" {
		return nil, fmt.Errorf("candidate: election, namespace and identity are required (got %q, %q, %q)", cfg.Election, cfg.Namespace, cfg.Identity)
	}
	if cfg.LeaseDuration > MaxLease {
		return nil, fmt.Errorf("candidate: lease %s: at most %s", cfg.LeaseDuration, MaxLease)
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
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.OnEvent == nil {
		cfg.OnEvent = func(string, string) {}
	}
	if wait := cfg.CampaignAt.Sub(cfg.Clock.Now()); wait > MaxCampaignWait {
		return nil, fmt.Errorf("candidate: campaign at %s: %s ahead, at most %s", cfg.CampaignAt.Format(time.RFC3339Nano), wait.Round(time.Second), MaxCampaignWait)
	}
	meta := metav1.ObjectMeta{Name: cfg.Election, Namespace: cfg.Namespace}
	lc := resourcelock.ResourceLockConfig{Identity: cfg.Identity}
	c := &Candidate{cfg: cfg, kick: make(chan struct{}, 1), hc: &http.Client{Timeout: 300 * time.Millisecond},
		record: &Record{Client: cfg.Client.CoreV1(), Namespace: cfg.Namespace, Log: cfg.Log, Clock: cfg.Clock}}
	switch {
	case cfg.Algorithm == balance.BLDOptimistic && cfg.Lock != LockLease && cfg.Lock != "":
		return nil, fmt.Errorf("lock %q: bld-optimistic keeps its leader record in the namespace's Leases, so it runs on the lease lock", cfg.Lock)
	case cfg.Algorithm == balance.BLDOptimistic:
		c.nodeLock = &trackedLeaseLock{meta: meta, client: cfg.Client.CoordinationV1(), identity: cfg.Identity}
		c.lock = &watchedLock{trackedLeaseLock: c.nodeLock, own: func() (*coordinationv1.Lease, bool) {
			if c.view == nil { // set before the elector runs
				return nil, false
			}
			return c.view.own()
		}}
	case cfg.Algorithm == balance.Ranked && (cfg.Lock == LockLease || cfg.Lock == ""):
		// The leader annotates the Lease with its ranking every
		// RankInterval: a lock that keeps track of those writes hands
		// over without a write that fails on them.
		c.lock = &trackedLeaseLock{meta: meta, client: cfg.Client.CoordinationV1(), identity: cfg.Identity}
	case cfg.Lock == LockLease || cfg.Lock == "":
		c.lock = leaseLock{&resourcelock.LeaseLock{LeaseMeta: meta, Client: cfg.Client.CoordinationV1(), LockConfig: lc}}
	case cfg.Lock == LockEndpoints:
		c.lock = &EndpointsLock{EndpointsMeta: meta, Client: cfg.Client.CoreV1(), LockConfig: lc}
	default:
		return nil, fmt.Errorf("lock %q: want lease or endpoints", cfg.Lock)
	}
	c.lock = termLock{c.lock, c.noteRecord, c.endLeadership}
	return c, nil
}

// Leader returns the leader as this candidate knows it (LeaderTerm).
func (c *Candidate) Leader() string {
	l, _, _ := c.LeaderTerm()
	return l
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
	if c.cfg.Algorithm == balance.BLDOptimistic {
		// The view is the candidate's standing state, as it is for every
		// election after the first: it is built while a held candidate
		// waits, so a campaign at an instant starts with it.
		c.nodeLock.node = c.cfg.Node // known now (publish)
		c.view = newView(c.cfg.Election, c.cfg.Identity, c.cfg.Node, c.cfg.Clock, c.Kick)
		c.view.start(ctx, c.cfg.Client, c.cfg.Namespace)
		go c.countWorkers(ctx)
	}
	if wait := c.cfg.CampaignAt.Sub(c.cfg.Clock.Now()); wait > 0 {
		select {
		case <-ctx.Done():
			return nil
		case <-c.cfg.Clock.After(wait):
		}
	}
	c.cfg.OnEvent("campaign", "")
	// Leadership ends when the leader context does: both electors cancel
	// it before they release the lease, and call OnStoppedLeading only
	// after, so a "stopped" sent from there could follow the successor's
	// "started" and look like two leaders at once. The goroutine that waits
	// for the end races the release too (on a loaded machine it lost, in a
	// drain of kube-rebalance), so the lock's release sends "stopped" first.
	started := func(lctx context.Context) {
		c.mu.Lock()
		c.leader, c.leading = c.cfg.Identity, true
		c.mu.Unlock()
		// At once, though the loops below may still be waiting on the API
		// server.
		context.AfterFunc(lctx, func() {
			c.mu.Lock()
			c.leading = false
			c.mu.Unlock()
		})
		c.announceMu.Lock()
		// A leadership that ended before this goroutine ran is not
		// announced: its lease may be someone else's by now.
		if lctx.Err() == nil {
			c.announced = true
			c.cfg.OnEvent("started", c.cfg.Identity)
		}
		c.announceMu.Unlock()
		if c.sharesRecord() {
			c.confirmLoop(lctx)
		}
		if c.cfg.Algorithm == balance.Ranked {
			c.rankLoop(lctx)
		}
		<-lctx.Done()
		c.endLeadership(successor(lctx))
	}
	stopped := func() {
		if c.sharesRecord() {
			rctx, cancel := context.WithTimeout(context.Background(), c.cfg.RenewDeadline)
			defer cancel()
			c.record.Release(rctx, c.cfg.Election, c.cfg.Identity)
		}
	}
	if c.cfg.Algorithm == balance.CLEBalanced {
		return c.runCoordinated(ctx, started)
	}
	if c.cfg.Algorithm == balance.Default {
		// client-go's elector, unchanged; it returns after losing the
		// lease, so campaign again.
		for ctx.Err() == nil {
			le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
				Lock: freshLock{timedLock{c.lock, c.cfg.Log, c.cfg.Clock}}, LeaseDuration: c.cfg.LeaseDuration, RenewDeadline: c.cfg.RenewDeadline,
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
		OnStartedLeading: started, OnStoppedLeading: stopped, OnNewLeader: c.setLeader, Kick: c.kick, Log: c.cfg.Log, Clock: c.cfg.Clock,
		OnRefused: func() { c.cfg.OnEvent("refused", "") },
	}
	switch {
	case c.cfg.Algorithm == balance.BLDOptimistic:
		cfg.Prefetch, cfg.Unclaimed = c.view.waitSynced, c.view.unclaimed
		cfg.Gate, cfg.Validate = c.optimisticGate, c.validateInOrder
		cfg.GateRetry = c.cfg.RetryPeriod / 40
	case balance.Balanced(c.cfg.Algorithm):
		cfg.Gate, cfg.AfterAttempt, cfg.Prefetch, cfg.Unclaimed = c.balanceGate, c.afterBalanced, c.readAhead, c.unclaimed
		cfg.GateRetry = c.cfg.RetryPeriod / 40
	}
	if c.cfg.Algorithm == balance.Ranked {
		cfg.Gate, cfg.Handover = c.rankGate, c.handover
	}
	NewElector(cfg).Run(ctx)
	return nil
}

// publish finds this candidate's node and announces its probe address on
// its Pod. What may pass — the API server not reachable yet, as when a
// relay in front of it starts beside the elector, or a timeout — is tried
// again every retry period, as the election itself would be; a refusal
// (forbidden, not found, invalid) is final.
func (c *Candidate) publish(ctx context.Context) error {
	for {
		err := c.publishOnce(ctx)
		if err == nil || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsUnauthorized(err) {
			return err
		}
		c.cfg.Log.Warn("publishing the candidate's node and probe address; trying again", "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-c.cfg.Clock.After(c.cfg.RetryPeriod):
		}
	}
}

func (c *Candidate) publishOnce(ctx context.Context) error {
	pods := c.cfg.Client.CoreV1().Pods(c.cfg.Namespace)
	if c.cfg.Node == "" {
		pod, err := pods.Get(ctx, c.cfg.Identity, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("candidate %s: reading its Pod for the node name: %w", c.cfg.Identity, err)
		}
		c.cfg.Node = pod.Spec.NodeName
	}
	if c.cfg.ProbeAddr == "" || c.cfg.Algorithm != balance.Ranked {
		return nil // only ranked leaders probe their followers
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{ProbeAnnotation: c.cfg.ProbeAddr}}})
	if _, err := pods.Patch(ctx, c.cfg.Identity, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("candidate %s: publishing the probe address: %w", c.cfg.Identity, err)
	}
	return nil
}
