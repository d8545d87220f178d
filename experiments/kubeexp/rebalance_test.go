package kubeexp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ringside/ringside/experiments/backend/kube"
)

// A move's gap runs from the end of the previous leadership of its
// election to its start; an overlap is no gap; leaderships before the
// join are not moves; events arrive out of order from many processes.
func TestMoveGaps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ev := func(ms int, event, id, election string) kube.Event {
		return kube.Event{TS: at(ms), Event: event, ID: id, Election: election}
	}
	events := []kube.Event{
		ev(0, "started", "a-0", "a"),
		ev(5, "started", "b-0", "b"),
		ev(1300, "started", "a-3", "a"), // listed before the stop it follows
		ev(1000, "stopped", "a-0", "a"),
		ev(2000, "started", "b-3", "b"), // b-0 still leads: an overlap
		ev(2100, "stopped", "b-0", "b"),
		ev(3000, "killed", "a-3", "a"),
		ev(3450, "started", "a-1", "a"),
	}
	mc := moveGaps(events, at(500))
	assert.Equal(t, []time.Duration{300 * time.Millisecond, 0, 450 * time.Millisecond}, mc.gaps)
	assert.Zero(t, mc.regained)
	assert.Zero(t, mc.ordered, "no stop named a successor")
	assert.Empty(t, moveGaps(events, at(4000)).gaps, "no leadership started after the join")
	// An election whose leader ended before the join counts from the join.
	mc = moveGaps([]kube.Event{ev(0, "started", "c-0", "c"), ev(100, "stopped", "c-0", "c"), ev(700, "started", "c-1", "c")}, at(500))
	assert.Equal(t, []time.Duration{200 * time.Millisecond}, mc.gaps)
}

// A leader that lost its Lease (a renewal missed under load) and took it
// again moved nothing: counted apart. Its election's next change of
// leader, and a return to an earlier one, are moves.
func TestMoveGapsLeaveOutALeaderRegainingItsLease(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ev := func(ms int, event, id string) kube.Event {
		return kube.Event{TS: t0.Add(time.Duration(ms) * time.Millisecond), Event: event, ID: id, Election: "a"}
	}
	mc := moveGaps([]kube.Event{
		ev(0, "started", "a-0"),
		ev(600, "stopped", "a-0"),
		ev(900, "started", "a-0"), // regained
		ev(1000, "stopped", "a-0"),
		ev(1100, "started", "a-1"), // a move
		ev(1200, "stopped", "a-1"),
		ev(1500, "started", "a-0"), // back to the earlier leader: a move
	}, t0.Add(500*time.Millisecond))
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 300 * time.Millisecond}, mc.gaps)
	assert.Equal(t, 1, mc.regained)
}

// A move is ordered when the previous leader's "stopped" named the
// candidate that then started; a stop naming another, a kill, or a stop
// by someone who no longer led leaves the next move a re-election.
func TestMoveGapsTellOrderedMovesFromReElections(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ev := func(ms int, event, id, to string) kube.Event {
		return kube.Event{TS: t0.Add(time.Duration(ms) * time.Millisecond), Event: event, ID: id, Election: "a", Leader: to}
	}
	mc := moveGaps([]kube.Event{
		ev(0, "started", "a-0", "a-0"),
		ev(600, "stopped", "a-0", "a-1"),
		ev(900, "started", "a-1", "a-1"),  // ordered
		ev(1000, "stopped", "a-1", ""),    // lost
		ev(1100, "started", "a-2", "a-2"), // a re-election
		ev(1200, "stopped", "a-2", "a-3"),
		ev(1300, "started", "a-0", "a-0"), // not the one it named: a re-election
		ev(1400, "stopped", "a-0", "a-3"),
		ev(1410, "stopped", "a-2", "a-1"), // late, and not the last leader's
		ev(1500, "started", "a-3", "a-3"), // ordered
		ev(1600, "killed", "a-3", ""),
		ev(1700, "started", "a-1", "a-1"), // after a kill: a re-election
	}, t0.Add(500*time.Millisecond))
	assert.Len(t, mc.gaps, 5)
	assert.Equal(t, 2, mc.ordered)
}
