package ring

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func electors(t *testing.T, alg Algorithm, uids ...UID) map[UID]Elector {
	t.Helper()
	r, err := NewRing(uids)
	require.NoError(t, err)
	out := map[UID]Elector{}
	for _, u := range uids {
		e, err := alg.NewElector(Config{Self: u, Ring: r})
		require.NoError(t, err)
		out[u] = e
	}
	return out
}

// A member whose peers are all marked down wins and ends its announcement
// within the one call that started the election (Bully at its next Tick):
// its Status is never seen Announcing, so the counters are what tells an
// observer (ringnode's failover events) that an election ended there.
func TestAnAnnouncementEndingInTheCallThatStartedItIsCounted(t *testing.T) {
	for _, alg := range Algorithms() {
		t.Run(alg.Name, func(t *testing.T) {
			e := electors(t, alg, u(1), u(5), u(9))[u(5)]
			e.MarkDown(u(1))
			e.MarkDown(u(9))
			assert.Empty(t, e.Start(0), "no one to send to")
			if alg.Topology == Complete {
				assert.True(t, e.Status().Announcing)
				e.Tick(0)
			}
			assert.Equal(t, Status{Leader: u(5), Round: 1}, e.Status())
			assert.Equal(t, Stats{Initiated: 1, Announced: 1, Ended: 1}, e.Stats())
		})
	}
}

// In an election among three live members exactly one announces, and its
// announcement ends there: the winner's, or (Dolev–Klawe–Rodeh) the one
// that named it.
func TestOneAnnouncementPerElection(t *testing.T) {
	for _, alg := range Algorithms() {
		t.Run(alg.Name, func(t *testing.T) {
			es := electors(t, alg, u(1), u(5), u(9))
			queue := es[u(1)].Start(0)
			for steps := 0; len(queue) > 0; steps++ {
				require.Less(t, steps, 1000, "the election does not end")
				m := queue[0]
				queue = append(queue[1:], es[m.To].Step(0, m)...)
				if len(queue) == 0 {
					for _, e := range es { // Bully ends its announcement at a Tick
						queue = append(queue, e.Tick(0)...)
					}
				}
			}
			var announced, ended int
			for id, e := range es {
				assert.Equal(t, u(9), e.Status().Leader, "member %v", id)
				announced += e.Stats().Announced
				ended += e.Stats().Ended
			}
			assert.Equal(t, 1, announced)
			assert.Equal(t, 1, ended)
		})
	}
}

// A member busy in an older round — taking part, or announcing — that
// hears a smaller member's heartbeat of a newer round challenges it, in
// every algorithm: its candidacy was lost with the old round, and
// following would leave the smaller leader for good
// (TestALargerLiveNodeChallengesASmallerLeader has Chang–Roberts' cases
// in detail).
func TestABusyLargerMemberChallengesANewerSmallerLeader(t *testing.T) {
	for _, alg := range Algorithms() {
		t.Run(alg.Name, func(t *testing.T) {
			e := electors(t, alg, u(1), u(5), u(9))[u(9)]
			e.Start(0)
			require.Equal(t, uint64(1), e.Status().Round)
			st := e.Status()
			require.True(t, st.Participant || st.Announcing || st.Leader == u(9), "%+v", st)
			e.Step(time.Second, Message{Type: MsgHeartbeat, From: u(5), To: u(9), Cand: u(5), Round: 2})
			assert.Equal(t, 1, e.Stats().Challenges)
			assert.Equal(t, uint64(3), e.Status().Round, "a round newer than the heartbeat's")
			assert.NotEqual(t, u(5), e.Status().Leader)
		})
	}
}
