package kubeexp

import (
	"slices"
	"time"
)

// What kube-split-brain reads from a run: every write each replica
// applied (leaderapp's write log), every write a client had acknowledged,
// and every replica's store at the end. judge, lostAcked and
// droppedAcked are pure functions of them.

// appliedWrite is one line of a replica's write log.
type appliedWrite struct {
	At       time.Time
	Replica  string // who applied it
	Key      string
	Seq      uint64
	Term     int64  // the term of the leader that numbered it, as its sidecar said (-1: unknown)
	Leader   string // the replica that numbered it
	AsLeader bool
}

// tenure is one replica acting as leader of one term: when it applied
// writes as leader.
type tenure struct {
	replica     string
	term        int64
	first, last time.Time
	at          []time.Time // its leader writes, in time order
}

// actingGap is the longest pause between two leader writes of a tenure
// that still counts as acting throughout: the writers keep every leader
// busy every few milliseconds, so a longer gap is a leader that was not
// acting (frozen, or not leader for a while).
const actingGap = 250 * time.Millisecond

// acting is the tenure's activity as intervals: consecutive writes no
// more than actingGap apart joined.
func (t tenure) acting() [][2]time.Time {
	var out [][2]time.Time
	for i, w := range t.at {
		if i > 0 && w.Sub(t.at[i-1]) <= actingGap {
			out[len(out)-1][1] = w
			continue
		}
		out = append(out, [2]time.Time{w, w})
	}
	return out
}

// tenures groups the leader writes by (replica, term), ordered by their
// first write.
func tenures(log []appliedWrite) []tenure {
	byKey := map[[2]any]*tenure{}
	var out []*tenure
	for _, w := range log {
		if !w.AsLeader {
			continue
		}
		k := [2]any{w.Replica, w.Term}
		t := byKey[k]
		if t == nil {
			t = &tenure{replica: w.Replica, term: w.Term}
			byKey[k] = t
			out = append(out, t)
		}
		t.at = append(t.at, w.At)
	}
	res := make([]tenure, len(out))
	for i, t := range out {
		slices.SortFunc(t.at, time.Time.Compare)
		t.first, t.last = t.at[0], t.at[len(t.at)-1]
		res[i] = *t
	}
	slices.SortFunc(res, func(a, b tenure) int { return a.first.Compare(b.first) })
	return res
}

// overlap is the time both interval lists cover, and when it ends.
func overlap(a, b [][2]time.Time) (time.Duration, time.Time) {
	var d time.Duration
	var end time.Time
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := later(a[i][0], b[j][0]), earlier(a[i][1], b[j][1])
		if hi.After(lo) {
			d += hi.Sub(lo)
			end = later(end, hi)
		}
		if a[i][1].Before(b[j][1]) {
			i++
		} else {
			j++
		}
	}
	return d, end
}

// splitVerdict is what one run showed.
type splitVerdict struct {
	// Overlap is the time two tenures of different replicas both acted
	// as leader (tenure.acting), summed over pairs.
	Overlap time.Duration
	// StaleLeader counts the writes a replica applied as leader of a term
	// after a newer term's leader had applied its first write;
	// StaleAccepted the followers' applies of such writes.
	StaleLeader, StaleAccepted int
	// FenceViolations counts applies, at one replica, of a write of an
	// older term than one that replica had already applied: what fencing
	// forbids.
	FenceViolations int
	// SingleLeader is the time from the fault until only one replica acts
	// as leader: the end of the last overlap, or the successor's first
	// write when there was none (0 when nobody took over, or before the
	// fault).
	SingleLeader time.Duration
	Successor    string
}

// judge reads a run's write logs; fault is when the fault began and victim
// the leader it hit.
func judge(log []appliedWrite, fault time.Time, victim string) splitVerdict {
	var v splitVerdict
	ts := tenures(log)
	end := time.Time{}
	for i, a := range ts {
		for _, b := range ts[i+1:] {
			if a.replica == b.replica {
				continue
			}
			d, e := overlap(a.acting(), b.acting())
			v.Overlap += d
			end = later(end, e)
		}
	}
	// The newest term established by a leader's first write, over time.
	type rise struct {
		at   time.Time
		term int64
	}
	var rises []rise
	for _, t := range ts {
		if len(rises) == 0 || t.term > rises[len(rises)-1].term {
			rises = append(rises, rise{t.first, t.term})
		}
	}
	newestAt := func(at time.Time) int64 {
		n := int64(-1)
		for _, r := range rises {
			if r.at.Before(at) {
				n = max(n, r.term)
			}
		}
		return n
	}
	seen := map[string]int64{}
	sorted := slices.Clone(log)
	slices.SortStableFunc(sorted, func(a, b appliedWrite) int { return a.At.Compare(b.At) })
	for _, w := range log { // each replica's own order, as it logged them
		if s, ok := seen[w.Replica]; ok && w.Term < s {
			v.FenceViolations++
		}
		seen[w.Replica] = max(seen[w.Replica], w.Term)
	}
	for _, w := range sorted {
		if w.Term >= newestAt(w.At) {
			continue
		}
		if w.AsLeader {
			v.StaleLeader++
		} else {
			v.StaleAccepted++
		}
	}
	// The successor may have begun before the fault: a slow-clocked
	// leader loses its lease while it still renews (docs/split-brain.md).
	for _, t := range ts {
		if t.replica != victim {
			v.Successor = t.replica
			v.SingleLeader = max(0, later(end, t.first).Sub(fault))
			break
		}
	}
	return v
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// ackedWrite is a write a client had acknowledged: attempt is its
// writer's sequence number (values are "<writer>-<attempt>"), Seq and
// Leader the number and the replica the answer named.
type ackedWrite struct {
	Key     string
	Attempt int
	Seq     uint64
	Leader  string
}

// droppedAcked counts the acknowledged writes some replica answered for
// without applying, because it held a write of the key numbered as high
// by another leader — a deposed one's: without fencing the two leaders'
// numbers are not ordered. (A write dropped for a later one of the same
// leader is superseded, not lost.) Such a replica, leading next, would
// serve the deposed leader's value.
func droppedAcked(acked []ackedWrite, log []appliedWrite) int {
	type applied struct {
		key    string
		seq    uint64
		leader string
	}
	has := map[string]map[applied]bool{}
	highest := map[string]map[string]map[string]uint64{} // replica → key → leader → the highest seq applied
	for _, w := range log {
		if has[w.Replica] == nil {
			has[w.Replica], highest[w.Replica] = map[applied]bool{}, map[string]map[string]uint64{}
		}
		has[w.Replica][applied{w.Key, w.Seq, w.Leader}] = true
		if highest[w.Replica][w.Key] == nil {
			highest[w.Replica][w.Key] = map[string]uint64{}
		}
		highest[w.Replica][w.Key][w.Leader] = max(highest[w.Replica][w.Key][w.Leader], w.Seq)
	}
	n := 0
	for _, a := range acked {
		for r, got := range has {
			if got[applied{a.Key, a.Seq, a.Leader}] {
				continue
			}
			for leader, seq := range highest[r][a.Key] {
				if leader != a.Leader && seq >= a.Seq {
					n++
					break
				}
			}
		}
	}
	return n
}

// lostAcked counts (replica, key) pairs whose final value is older than
// the last acknowledged write of the key — an acknowledged write that
// replica lost, and would lose for good if it led next. final maps
// replica → key → the attempt its value carries (missing: no value).
func lostAcked(acked []ackedWrite, final map[string]map[string]int) int {
	last := map[string]int{}
	for _, a := range acked {
		last[a.Key] = max(last[a.Key], a.Attempt)
	}
	n := 0
	for _, held := range final {
		for key, a := range last {
			if got, ok := held[key]; !ok || got < a {
				n++
			}
		}
	}
	return n
}
