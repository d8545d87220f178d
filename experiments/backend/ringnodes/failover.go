package ringnodes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/server"
)

// Failover is what one coordinator kill measured. Times are from the kill.
type Failover struct {
	Election               string // the algorithm every server reported running
	Killed, NewCoordinator string
	NewIsMaxLive           bool
	Coordinators           int // live servers that claim the role afterwards
	Detect                 time.Duration
	Propagation            time.Duration // first ELECTION sent → ELECTED back at the winner
	// ElectedRound is the winner's ELECTED going once around the
	// survivors: n−1 hops of one message, no detection skew in it.
	ElectedRound time.Duration
	// ElectedAt is when the winner read its ELECTION back and so sent that
	// ELECTED (Unix ns, its clock):
	// with ElectedRound, the round's window in a system-wide trace.
	ElectedAt int64
	// ElectedForward is the survivors' own share of an ELECTED hop: the
	// median, over those that passed the winner's ELECTED on, of the time
	// from reading it to the forward's write returning (0: unknown).
	ElectedForward time.Duration
	AllKnow        time.Duration // every live server knows the new coordinator
	Metadata       time.Duration // every live server has the new metadata
	Sent           map[string]int64
}

// Coordinator returns the coordinator all servers agree on.
func Coordinator(ctx context.Context, addrs []string) (string, map[string]server.Status, error) {
	sts, err := StatusAll(ctx, addrs)
	if err != nil {
		return "", nil, err
	}
	leader := ""
	for a, st := range sts {
		if st.Leader == "" || leader != "" && st.Leader != leader || st.Participant {
			return "", sts, fmt.Errorf("no settled coordinator: %s follows %q", a, st.Leader)
		}
		leader = st.Leader
	}
	return leader, sts, nil
}

// WaitSettled waits until all servers follow one coordinator with a ring
// of exactly their number.
func WaitSettled(ctx context.Context, addrs []string, limit time.Duration) (string, error) {
	coord, _, err := settledStatus(ctx, addrs, limit)
	return coord, err
}

// settledStatus is WaitSettled that also returns the statuses that showed
// the ring settled: none of them electing.
func settledStatus(ctx context.Context, addrs []string, limit time.Duration) (string, map[string]server.Status, error) {
	var coord string
	var sts map[string]server.Status
	err := Poll(ctx, limit, func() (bool, error) {
		c, all, err := Coordinator(ctx, addrs)
		if err != nil {
			return false, nil
		}
		for _, st := range all {
			if len(st.Servers) != len(addrs) {
				return false, nil
			}
		}
		coord, sts = c, all
		return true, nil
	})
	return coord, sts, err
}

// KillCoordinator crashes the settled coordinator of r and measures the
// failover until every live server follows the new one.
//
// The kill must meet a quiet ring. A server whose detector fired falsely
// between the settled look and the kill (a loaded machine) has an
// election under way that the kill only joins: no detector fires after
// it, and the times would not be a failover's. Such a run returns
// ErrDisturbed, with Killed set, to be run again.
func KillCoordinator(ctx context.Context, r Ring) (Failover, error) {
	addrs := r.Addrs()
	coord, before, err := settledStatus(ctx, addrs, 20*time.Second)
	if err != nil {
		return Failover{}, fmt.Errorf("before the kill: %w; %s", err, Describe(ctx, addrs))
	}
	election := before[coord].Election
	for a, st := range before {
		if st.Election != election {
			return Failover{}, fmt.Errorf("%s runs the %s election, %s the %s one: not one ring", a, st.Election, coord, election)
		}
	}
	live := slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return a == coord })
	maxLive := live[0]
	for _, a := range live {
		if ring.UIDOf(maxLive).Less(ring.UIDOf(a)) {
			maxLive = a
		}
	}
	kill := time.Now().UnixNano()
	if err := r.Kill(ctx, coord); err != nil {
		return Failover{}, err
	}
	// While the election runs only the server expected to win is asked,
	// until it has taken over or follows another: a sweep of every
	// server's status every 20 ms woke each of them for an HTTP request
	// during the rounds it times (docs/ringnode.md has what that did to
	// them). Every figure comes from the servers' own clocks; the sweep
	// below checks the outcome.
	_ = Poll(ctx, 20*time.Second, func() (bool, error) {
		st, err := GetStatus(ctx, maxLive)
		return err == nil && (st.Coordinator || st.Leader != "" && st.Leader != coord && st.Leader != maxLive && !st.Participant), nil
	})
	newCoord, err := WaitSettled(ctx, live, 20*time.Second)
	if err != nil {
		return Failover{}, fmt.Errorf("after killing %s: %w; %s", coord, err, Describe(ctx, live))
	}
	after, err := StatusAll(ctx, live)
	if err != nil {
		return Failover{}, err
	}
	f := Failover{Election: election, Killed: coord, NewCoordinator: newCoord, NewIsMaxLive: newCoord == maxLive, Sent: map[string]int64{}}
	var detect, firstSent, allKnow, meta, won, announced int64
	var ender string
	for a, st := range after {
		ev := st.Events
		// The election ended where its announcement came back: at the
		// winner, or (Dolev–Klawe–Rodeh) at the member that named it.
		if ev.Won > kill && ev.Won > won {
			won, announced, ender = ev.Won, ev.Announced, a
		}
		if st.Coordinator {
			f.Coordinators++
		}
		if ev.Suspected > kill && (detect == 0 || ev.Suspected < detect) {
			detect = ev.Suspected
		}
		if ev.ElectionSent > kill && (firstSent == 0 || ev.ElectionSent < firstSent) {
			firstSent = ev.ElectionSent
		}
		allKnow = max(allKnow, ev.LeaderKnown)
		meta = max(meta, ev.MetaApplied)
		for k, v := range st.Sent {
			f.Sent[k] += v - before[a].Sent[k]
		}
	}
	since := func(t int64) time.Duration {
		if t == 0 {
			return -1
		}
		return time.Duration(t - kill)
	}
	if detect == 0 {
		var b strings.Builder
		for _, a := range live {
			fmt.Fprintf(&b, " %s %s;", a, sinceKill(after[a].Events.Suspected, kill))
		}
		return Failover{Killed: coord}, fmt.Errorf("%w: no detector fired after killing %s; last suspicions:%s", ErrDisturbed, coord, b.String())
	}
	f.Detect, f.AllKnow, f.Metadata = since(detect), since(allKnow), since(meta)
	if won > 0 && firstSent > 0 {
		f.Propagation = time.Duration(won - firstSent)
	}
	if won > 0 && announced > 0 {
		f.ElectedRound, f.ElectedAt = time.Duration(won-announced), announced
		f.ElectedForward = forwardShare(after, ender, kill)
	}
	return f, nil
}

// forwardShare is the median time the servers but ender took to pass on
// the ELECTED of the election after kill (those that learned their
// leader since), from their statuses; 0 when none says. The median: a
// server whose successor died dials its new one first, a connection
// set-up that is no hop's usual cost.
func forwardShare(sts map[string]server.Status, ender string, kill int64) time.Duration {
	var ds []int64
	for a, st := range sts {
		if a != ender && st.Events.LeaderKnown > kill && st.Events.ElectedForward > 0 {
			ds = append(ds, st.Events.ElectedForward)
		}
	}
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return time.Duration(ds[len(ds)/2])
}

// ErrDisturbed: an election was under way when the coordinator was
// killed (KillCoordinator).
var ErrDisturbed = errors.New("the ring was electing at the kill")

// sinceKill describes instant t (Unix ns, 0 never) against the kill.
func sinceKill(t, kill int64) string {
	if t == 0 {
		return "never"
	}
	return fmt.Sprintf("%+.1f ms from the kill", float64(t-kill)/1e6)
}

// Describe summarises what each server believes, for error messages.
func Describe(ctx context.Context, addrs []string) string {
	var b strings.Builder
	for _, a := range addrs {
		st, err := GetStatus(ctx, a)
		if err != nil {
			fmt.Fprintf(&b, "[%s: %v] ", a, err)
			continue
		}
		fmt.Fprintf(&b, "[%s: leader %q round %d participant %v meta v%d.%d %v] ", a, st.Leader, st.Round, st.Participant, st.MetaRound, st.MetaVersion, st.Servers)
	}
	return b.String()
}
