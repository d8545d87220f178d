package bld

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Ranked succession (seed 003): the leader probes its followers' RTTs,
// ranks them, stores the ranking on the lock object and, on graceful
// shutdown, hands the lease to the best-ranked live follower.

// Follower is a ranked follower with its median RTT to the leader.
type Follower struct {
	ID   string        `json:"id"`
	Addr string        `json:"addr"`
	RTT  time.Duration `json:"rtt_ns"`
}

// successors reads the ranking the leader stored on the lock object.
func (c *Candidate) successors(ctx context.Context) ([]Follower, error) {
	ann, err := c.lock.Annotations(ctx)
	if err != nil {
		return nil, err
	}
	return RankingOf(ann)
}

// RankingOf reads the ranking a leader stored in its lock object's
// annotations; none stored is an empty ranking.
func RankingOf(ann map[string]string) ([]Follower, error) {
	raw, ok := ann[SuccessorAnnotation]
	if !ok {
		return nil, nil
	}
	out, err := decodeRanking(raw)
	if err != nil {
		return nil, fmt.Errorf("%s annotation: %w", SuccessorAnnotation, err)
	}
	return out, nil
}

// maxRanked bounds a ranking: far more replicas than any election has.
const maxRanked = 1024

// decodeRanking reads a ranking, which anyone allowed to edit the lock
// object writes: at most maxRanked followers, each named once, none with
// a negative RTT.
func decodeRanking(raw string) ([]Follower, error) {
	var out []Follower
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, err
	}
	if len(out) > maxRanked {
		return nil, fmt.Errorf("%d followers ranked, over %d", len(out), maxRanked)
	}
	seen := make(map[string]bool, len(out))
	for i, f := range out {
		switch {
		case f.ID == "" || seen[f.ID]:
			return nil, fmt.Errorf("follower %d: id %q is empty or ranked twice", i, f.ID)
		case f.RTT < 0:
			return nil, fmt.Errorf("follower %s: rtt_ns %d is negative", f.ID, f.RTT)
		}
		seen[f.ID] = true
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
		case <-c.cfg.Clock.After(c.cfg.RankInterval):
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
		if p.Name == c.cfg.Identity || p.Annotations[ProbeAnnotation] == "" {
			continue
		}
		addr, err := probeAddr(&p)
		if err != nil {
			c.cfg.Log.Warn("ranked: not probing a follower", "err", err)
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

// probeAddr is the Pod's announced probe address, if it is the Pod's own:
// its host one of the Pod's IPs — or, for a Pod no kubelet runs (the
// process backend: no IP), a loopback address. Anyone who may annotate a
// Pod would otherwise have the leader send requests wherever they like.
func probeAddr(p *v1.Pod) (string, error) {
	addr := p.Annotations[ProbeAnnotation]
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("pod %s: %s %q: %w", p.Name, ProbeAnnotation, addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("pod %s: %s %q: bad port", p.Name, ProbeAnnotation, addr)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "", fmt.Errorf("pod %s: %s %q: not an IP address", p.Name, ProbeAnnotation, addr)
	}
	var own []string
	for _, pi := range p.Status.PodIPs {
		own = append(own, pi.IP)
	}
	if p.Status.PodIP != "" {
		own = append(own, p.Status.PodIP)
	}
	switch {
	case len(own) == 0 && ip.IsLoopback():
	case slices.ContainsFunc(own, func(s string) bool { o, err := netip.ParseAddr(s); return err == nil && o == ip }):
	default:
		return "", fmt.Errorf("pod %s: %s %q: not the Pod's own address (%v)", p.Name, ProbeAnnotation, addr, own)
	}
	return addr, nil
}

func (c *Candidate) probe(ctx context.Context, addr string) (time.Duration, error) {
	t0 := c.cfg.Clock.Now()
	if err := c.call(ctx, http.MethodGet, addr, "/rtt"); err != nil {
		return 0, err
	}
	return c.cfg.Clock.Since(t0), nil
}

// call sends a bodiless request to a peer's sidecar. The address comes
// from the peer's Pod annotation: one that cannot make a URL is an error,
// not a nil request.
func (c *Candidate) call(ctx context.Context, method, addr, path string) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, nil)
	if err != nil {
		return fmt.Errorf("sidecar %q: %w", addr, err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func (c *Candidate) storeRanking(ctx context.Context, ranking []Follower) error {
	raw, _ := json.Marshal(ranking)
	return c.lock.Annotate(ctx, map[string]string{SuccessorAnnotation: string(raw)})
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
		return r.ID, func() { c.call(ctx, http.MethodPost, r.Addr, "/kick") }
	}
	return "", nil
}
