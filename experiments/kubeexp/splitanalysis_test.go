package kubeexp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A stale leader (a, term 1), frozen from 100 ms to 2100 ms, goes on
// writing for 300 ms after its
// successor (b, term 2) began: 300 ms of overlap, its writes after b's
// first counted as stale, as leader and where a follower took them, and
// c's taking a term-1 write after a term-2 one is what fencing forbids.
func TestJudgeMeasuresOverlapAndStaleWrites(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	lead := func(ms int, r string, term int64) appliedWrite {
		return appliedWrite{At: at(ms), Replica: r, Key: "k", Term: term, Leader: r, AsLeader: true}
	}
	follow := func(ms int, r, from string, term int64) appliedWrite {
		return appliedWrite{At: at(ms), Replica: r, Key: "k", Term: term, Leader: from}
	}
	log := []appliedWrite{
		// a, in its own order
		lead(0, "a", 1), lead(100, "a", 1), lead(2100, "a", 1), lead(2200, "a", 1), lead(2300, "a", 1), lead(2400, "a", 1),
		// b, acting from 2100 ms on (and so b's 200 ms alone at 2500 ms,
		// more than actingGap after the last, is not acting throughout)
		follow(0, "b", "a", 1), lead(2100, "b", 2), lead(2200, "b", 2), lead(2300, "b", 2), lead(2400, "b", 2), lead(2500, "b", 2), lead(3000, "b", 2),
		// c
		follow(0, "c", "a", 1), follow(2100, "c", "b", 2), follow(2400, "c", "a", 1),
	}
	v := judge(log, at(1000), "a")
	assert.Equal(t, 300*time.Millisecond, v.Overlap)
	assert.Equal(t, 3, v.StaleLeader, "a's writes after 2100 ms")
	assert.Equal(t, 1, v.StaleAccepted, "c took it")
	assert.Equal(t, 1, v.FenceViolations, "after a term-2 write")
	assert.Equal(t, "b", v.Successor)
	assert.Equal(t, 1400*time.Millisecond, v.SingleLeader, "from the fault to the overlap's end")

	// A clean hand-over: no overlap, nothing stale; single leader from
	// the successor's first write.
	clean := []appliedWrite{lead(0, "a", 1), lead(900, "a", 1), follow(900, "b", "a", 1), lead(2100, "b", 2), follow(2100, "a", "b", 2)}
	v = judge(clean, at(1000), "a")
	assert.Zero(t, v.Overlap)
	assert.Zero(t, v.StaleLeader+v.StaleAccepted+v.FenceViolations)
	assert.Equal(t, 1100*time.Millisecond, v.SingleLeader)

	// Taken over before the fault (a slow clock alone can do it).
	v = judge([]appliedWrite{lead(0, "a", 1), lead(100, "b", 2), lead(3000, "b", 2)}, at(1000), "a")
	assert.Equal(t, "b", v.Successor)
	assert.Zero(t, v.SingleLeader)

	// Nobody took over (a pause shorter than the lease).
	v = judge([]appliedWrite{lead(0, "a", 1), lead(3000, "a", 1)}, at(1000), "a")
	assert.Equal(t, splitVerdict{}, v)
}

func TestLostAckedComparesEveryReplicaWithTheLastAck(t *testing.T) {
	acked := []ackedWrite{{Key: "k1", Attempt: 1}, {Key: "k1", Attempt: 4}, {Key: "k2", Attempt: 2}}
	final := map[string]map[string]int{
		"a": {"k1": 4, "k2": 2},
		"b": {"k1": 5, "k2": 2}, // a later, unacknowledged attempt: not a loss
		"c": {"k1": 3},          // older than the ack, and k2 missing
	}
	assert.Equal(t, 2, lostAcked(acked, final))
}

// b acknowledged k@5, but a (the deposed leader) and c hold a's k@7,
// numbered higher: both dropped it and would serve a's value. j@6,
// missing at c behind b's own j@8, is superseded, not lost.
func TestDroppedAckedCountsWritesHiddenByAnotherLeader(t *testing.T) {
	w := func(r, key string, seq uint64, leader string) appliedWrite {
		return appliedWrite{Replica: r, Key: key, Seq: seq, Leader: leader, AsLeader: r == leader}
	}
	log := []appliedWrite{
		w("a", "k", 7, "a"),
		w("b", "k", 5, "b"), w("b", "j", 8, "b"),
		w("c", "k", 7, "a"), w("c", "j", 8, "b"),
	}
	acked := []ackedWrite{{Key: "k", Seq: 5, Leader: "b"}, {Key: "j", Seq: 6, Leader: "b"}, {Key: "j", Seq: 8, Leader: "b"}}
	assert.Equal(t, 2, droppedAcked(acked, log), "k@5 at a and at c")
}
