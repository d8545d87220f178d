package ring

import (
	"crypto/md5"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func u(k uint64) UID { return UID{Lo: k} }

func TestUID(t *testing.T) {
	want := md5.Sum([]byte("127.0.0.1:7000"))
	got := UIDOf("127.0.0.1:7000")
	assert.Equal(t, want, got.Bytes())
	assert.Equal(t, -1, UID{Hi: 1}.Cmp(UID{Hi: 2}))
	assert.Equal(t, 1, UID{Hi: 2, Lo: 0}.Cmp(UID{Hi: 1, Lo: ^uint64(0)}), "high word dominates")
	assert.Equal(t, 0, got.Cmp(got))

	back, err := ParseUID(got.String())
	require.NoError(t, err)
	assert.Equal(t, got, back)
	_, err = ParseUID("xyz")
	assert.ErrorContains(t, err, "want 32 hex digits")
	_, err = ParseUID("zz345678901234567890123456789012")
	assert.Error(t, err)
}

func TestNewRingRejectsDuplicates(t *testing.T) {
	_, err := NewRing([]UID{u(1), u(2), u(1)})
	assert.ErrorContains(t, err, "appears twice")
	r, err := NewRing([]UID{u(1), u(2)})
	require.NoError(t, err)
	_, err = NewNode(Config{Self: u(3), Ring: r})
	assert.ErrorContains(t, err, "not in the ring")
}

// ring5 is a 5-member ring 1→3→5→7→9→1; node under test is 5 (successor 7).
func ring5(t *testing.T, cfg Config) *Node {
	t.Helper()
	r, err := NewRing([]UID{u(1), u(3), u(5), u(7), u(9)})
	require.NoError(t, err)
	cfg.Self, cfg.Ring = u(5), r
	n, err := NewNode(cfg)
	require.NoError(t, err)
	return n
}

func msg(typ MsgType, cand uint64, round uint64, hops uint32) Message {
	return Message{Type: typ, From: u(3), To: u(5), Cand: u(cand), Round: round, Hops: hops}
}

func TestElectionRules(t *testing.T) {
	type setup func(n *Node)
	rest := func(*Node) {}
	participant := func(n *Node) { n.Start(0) } // round becomes 1
	blocked := func(n *Node) {
		n.Start(0)
		n.Step(0, msg(MsgElected, 9, 1, 3))
	}
	cases := []struct {
		name  string
		setup setup
		in    Message
		out   []Message
		check func(t *testing.T, st Status)
	}{
		{"larger candidate is forwarded unchanged", rest, msg(MsgElection, 9, 1, 2),
			[]Message{{Type: MsgElection, From: u(5), To: u(7), Cand: u(9), Round: 1, Hops: 3}},
			func(t *testing.T, st Status) { assert.True(t, st.Participant) }},
		{"smaller candidate is replaced by self when not participant", rest, msg(MsgElection, 3, 1, 1),
			[]Message{{Type: MsgElection, From: u(5), To: u(7), Cand: u(5), Round: 1, Hops: 1}},
			func(t *testing.T, st Status) { assert.True(t, st.Participant) }},
		{"smaller candidate is discarded by a participant", participant, msg(MsgElection, 3, 1, 1), nil,
			func(t *testing.T, st Status) { assert.True(t, st.Participant) }},
		{"larger candidate is forwarded by a participant", participant, msg(MsgElection, 7, 1, 1),
			[]Message{{Type: MsgElection, From: u(5), To: u(7), Cand: u(7), Round: 1, Hops: 2}}, nil},
		{"own uid back makes the node leader", participant, msg(MsgElection, 5, 1, 5),
			[]Message{{Type: MsgElected, From: u(5), To: u(7), Cand: u(5), Round: 1, Hops: 1}},
			func(t *testing.T, st Status) {
				assert.Equal(t, u(5), st.Leader)
				assert.False(t, st.Participant)
				assert.True(t, st.Announcing)
			}},
		{"elected is recorded and forwarded, node blocks", participant, msg(MsgElected, 9, 1, 3),
			[]Message{{Type: MsgElected, From: u(5), To: u(7), Cand: u(9), Round: 1, Hops: 4}},
			func(t *testing.T, st Status) {
				assert.Equal(t, u(9), st.Leader)
				assert.True(t, st.Blocked)
				assert.False(t, st.Participant)
			}},
		{"a blocked node discards election messages of the decided round", blocked, msg(MsgElection, 7, 1, 1), nil,
			func(t *testing.T, st Status) { assert.True(t, st.Blocked) }},
		{"end unblocks", blocked, msg(MsgEnd, 9, 1, 0), nil,
			func(t *testing.T, st Status) { assert.False(t, st.Blocked); assert.Equal(t, u(9), st.Leader) }},
		{"a newer round resets participation", blocked, msg(MsgElection, 3, 2, 1),
			[]Message{{Type: MsgElection, From: u(5), To: u(7), Cand: u(5), Round: 2, Hops: 1}},
			func(t *testing.T, st Status) {
				assert.Equal(t, uint64(2), st.Round)
				assert.False(t, st.Blocked)
				assert.True(t, st.Leader.IsZero())
			}},
		{"a stale round is discarded", func(n *Node) { n.Start(0); n.Start(0); n.Tick(time.Hour) }, msg(MsgElection, 9, 0, 1), nil, nil},
		{"a message that outlived its candidate is dropped", rest, msg(MsgElection, 9, 1, 6), nil,
			func(t *testing.T, st Status) { assert.False(t, st.Participant) }},
		{"an unknown type is ignored", rest, Message{Type: 77, Round: 1}, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := ring5(t, Config{})
			c.setup(n)
			out := n.Step(0, c.in)
			if c.out == nil {
				assert.Empty(t, out)
			} else {
				assert.Equal(t, c.out, out)
			}
			if c.check != nil {
				c.check(t, n.Status())
			}
		})
	}
}

func TestStartIsIdempotentWhileParticipating(t *testing.T) {
	n := ring5(t, Config{})
	out := n.Start(0)
	require.Len(t, out, 1)
	assert.Equal(t, Message{Type: MsgElection, From: u(5), To: u(7), Cand: u(5), Round: 1, Hops: 1}, out[0])
	assert.Empty(t, n.Start(0))
	assert.Equal(t, 1, n.Stats().Initiated)
}

func TestLeaderBroadcastsEndWhenElectedReturns(t *testing.T) {
	n := ring5(t, Config{})
	n.Start(0)
	n.Step(0, msg(MsgElection, 5, 1, 5))
	n.MarkDown(u(1))
	out := n.Step(0, msg(MsgElected, 5, 1, 5))
	var to []UID
	for _, m := range out {
		assert.Equal(t, MsgEnd, m.Type)
		to = append(to, m.To)
	}
	assert.Equal(t, []UID{u(3), u(7), u(9)}, to, "END to every live member but self")
	assert.False(t, n.Status().Announcing)
}

func TestDeadSuccessorIsSkipped(t *testing.T) {
	n := ring5(t, Config{})
	out := n.Start(0)
	require.Equal(t, u(7), out[0].To)
	first := out[0]
	out = n.Unreachable(0, first)
	require.Len(t, out, 1)
	assert.Equal(t, u(9), out[0].To)
	assert.Equal(t, u(5), out[0].Cand)
	assert.True(t, n.IsDown(u(7)))

	// All others down: the node wins alone.
	for _, v := range []UID{u(9), u(1), u(3)} {
		n.MarkDown(v)
	}
	n.Unreachable(0, out[0])
	assert.Equal(t, u(5), n.Status().Leader)
	assert.False(t, n.Status().Participant)
}

func TestElectionTimeoutRestartsInNewRound(t *testing.T) {
	n := ring5(t, Config{HopBound: time.Millisecond})
	n.Start(0)
	at, ok := n.Deadline()
	require.True(t, ok)
	assert.Equal(t, 2*5*time.Millisecond, at)
	assert.Empty(t, n.Tick(at-1))
	out := n.Tick(at)
	require.Len(t, out, 1)
	assert.Equal(t, uint64(2), out[0].Round)
	assert.Equal(t, 1, n.Stats().Restarts)
}

func TestDetectorStartsElectionAndHeartbeatsDefer(t *testing.T) {
	// The coordinator is 7, this node's successor.
	n := ring5(t, Config{Leader: u(7), Round: 3, SuspectTimeout: 700 * time.Millisecond})
	hb := Message{Type: MsgHeartbeat, From: u(7), To: u(5), Cand: u(7), Round: 3}
	assert.Empty(t, n.Step(500*time.Millisecond, hb))
	assert.Empty(t, n.Tick(1100*time.Millisecond), "heartbeat at 500ms defers suspicion to 1200ms")
	out := n.Tick(1200 * time.Millisecond)
	require.Len(t, out, 1)
	assert.Equal(t, MsgElection, out[0].Type)
	assert.Equal(t, uint64(4), out[0].Round)
	assert.Equal(t, u(9), out[0].To, "the suspected coordinator is skipped")
	assert.True(t, n.IsDown(u(7)))
	assert.True(t, n.Status().Leader.IsZero(), "a suspected leader is forgotten")
}

func TestDetectorJitterStaysInRange(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		d := NewDetector(0, 700*time.Millisecond, 100*time.Millisecond, r)
		assert.GreaterOrEqual(t, d.Deadline(), 700*time.Millisecond)
		assert.Less(t, d.Deadline(), 800*time.Millisecond)
	}
	_, err := NewNode(Config{SuspectJitter: time.Millisecond})
	assert.ErrorContains(t, err, "needs Rand")
}

func TestHeartbeatCatchesUpARestartedNode(t *testing.T) {
	n := ring5(t, Config{Round: 2}) // restarted: persisted round, no leader
	n.Step(0, Message{Type: MsgHeartbeat, From: u(9), Cand: u(9), Round: 4})
	st := n.Status()
	assert.Equal(t, u(9), st.Leader)
	assert.Equal(t, uint64(4), st.Round)

	// An old coordinator's heartbeat cannot take it back.
	n.Step(0, Message{Type: MsgHeartbeat, From: u(7), Cand: u(7), Round: 3})
	assert.Equal(t, u(9), n.Status().Leader)
}

func TestLeaderSendsHeartbeats(t *testing.T) {
	n := ring5(t, Config{Leader: u(5), Round: 1, HeartbeatInterval: 100 * time.Millisecond})
	n.MarkDown(u(1))
	out := n.Tick(0)
	assert.Len(t, out, 3)
	at, ok := n.Deadline()
	require.True(t, ok)
	assert.Equal(t, 100*time.Millisecond, at)
	assert.Empty(t, n.Tick(50*time.Millisecond))
}

func TestElectionFromOthersSkipsAQuietCoordinator(t *testing.T) {
	cfg := Config{Leader: u(7), Round: 3, SuspectTimeout: 700 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond}
	n := ring5(t, cfg)
	n.Step(0, Message{Type: MsgHeartbeat, From: u(7), Cand: u(7), Round: 3})
	out := n.Step(150*time.Millisecond, msg(MsgElection, 3, 4, 1))
	require.Len(t, out, 1)
	assert.Equal(t, u(7), out[0].To, "a coordinator heard 150 ms ago stays in the ring")

	n = ring5(t, cfg)
	n.Step(0, Message{Type: MsgHeartbeat, From: u(7), Cand: u(7), Round: 3})
	out = n.Step(250*time.Millisecond, msg(MsgElection, 3, 4, 1))
	require.Len(t, out, 1)
	assert.Equal(t, u(9), out[0].To, "two missed heartbeats: the coordinator is skipped")
}

// A live node that an election passed by — its ELECTED, or a heartbeat of
// a newer round, names a smaller leader — challenges in a newer round
// with its own candidacy; at rest in the same round (a server that just
// joined a smaller coordinator) it follows.
func TestALargerLiveNodeChallengesASmallerLeader(t *testing.T) {
	r, err := NewRing([]UID{u(1), u(5), u(9)})
	require.NoError(t, err)
	newNode := func() *Node {
		n, err := NewNode(Config{Self: u(9), Ring: r, Round: 3, Leader: u(9)})
		require.NoError(t, err)
		return n
	}

	n := newNode()
	out := n.Step(time.Second, Message{Type: MsgElected, From: u(5), To: u(9), Cand: u(5), Round: 4})
	require.Len(t, out, 1)
	assert.Equal(t, Message{Type: MsgElection, From: u(9), To: u(1), Cand: u(9), Round: 5, Hops: 1}, out[0], "its own ELECTION, a round newer")
	assert.True(t, n.Status().Participant)
	assert.Equal(t, Stats{Initiated: 1, Challenges: 1}, n.Stats())

	n = newNode()
	out = n.Step(time.Second, Message{Type: MsgHeartbeat, From: u(5), To: u(9), Cand: u(5), Round: 4})
	require.Len(t, out, 1)
	assert.Equal(t, MsgElection, out[0].Type)
	assert.Equal(t, uint64(5), out[0].Round)
	assert.Equal(t, 1, n.Stats().Challenges)

	// Taking part in an older round — its own detector fired, or it was
	// announcing — when a smaller member's heartbeat says it won a newer
	// one: its candidacy was lost with the old round. Following would
	// leave the smaller leader for good — one way a ring can settle on a
	// smaller survivor, as ring-failover's n = 3 once did in a loaded
	// make test; it challenges.
	for _, announcing := range []bool{false, true} {
		b, err := NewNode(Config{Self: u(9), Ring: r, Round: 3})
		require.NoError(t, err)
		b.Step(time.Second, msg(MsgElection, 1, 4, 1)) // it takes part in round 4
		require.True(t, b.Status().Participant)
		if announcing {
			b.Step(time.Second, msg(MsgElection, 9, 4, 3)) // its own came back
			require.True(t, b.Status().Announcing)
		}
		out = b.Step(2*time.Second, Message{Type: MsgHeartbeat, From: u(5), To: u(9), Cand: u(5), Round: 5})
		require.Len(t, out, 1, "announcing %v", announcing)
		assert.Equal(t, Message{Type: MsgElection, From: u(9), To: u(1), Cand: u(9), Round: 6, Hops: 1}, out[0], "announcing %v", announcing)
		assert.Equal(t, 1, b.Stats().Challenges, "announcing %v", announcing)
	}

	// Same round: a coordinator it joined. It follows.
	j, err := NewNode(Config{Self: u(9), Ring: r, Round: 4, Leader: u(5)})
	require.NoError(t, err)
	assert.Empty(t, j.Step(time.Second, Message{Type: MsgHeartbeat, From: u(5), To: u(9), Cand: u(5), Round: 4}))
	assert.Equal(t, u(5), j.Status().Leader)
	assert.Zero(t, j.Stats().Challenges)

	// A larger leader is followed as always.
	m, err := NewNode(Config{Self: u(5), Ring: r, Round: 3})
	require.NoError(t, err)
	out = m.Step(time.Second, Message{Type: MsgElected, From: u(1), To: u(5), Cand: u(9), Round: 4})
	require.Len(t, out, 1)
	assert.Equal(t, MsgElected, out[0].Type)
	assert.Equal(t, u(9), m.Status().Leader)
}

// Per-hop acknowledgement: a received ELECTION is acknowledged (even a
// duplicate, which is not handled twice), an unacknowledged one is sent
// again after AckTimeout up to Retries times, and then its target is
// skipped like a refused one.
func TestHopsAreAcknowledgedAndRetransmitted(t *testing.T) {
	const ack = 10 * time.Millisecond
	n := ring5(t, Config{AckTimeout: ack, Retries: 2})
	in := msg(MsgElection, 9, 1, 1)
	out := n.Step(0, in)
	require.Len(t, out, 2)
	assert.Equal(t, Message{Type: MsgElection, Ack: true, From: u(5), To: u(3), Cand: u(9), Round: 1, Hops: 1}, out[0], "acknowledged to the sender")
	fwd := out[1]
	assert.Equal(t, Message{Type: MsgElection, From: u(5), To: u(7), Cand: u(9), Round: 1, Hops: 2}, fwd)

	dup := n.Step(time.Millisecond, in)
	require.Len(t, dup, 1, "a duplicate is acknowledged, not forwarded again")
	assert.True(t, dup[0].Ack)

	at, ok := n.Deadline()
	require.True(t, ok)
	assert.Equal(t, ack, at, "the retransmission timer")
	out = n.Tick(ack)
	require.Len(t, out, 1)
	want := fwd
	want.Resent = true
	assert.Equal(t, want, out[0])
	assert.Equal(t, 1, n.Stats().Retransmissions)
	n.Tick(2 * ack)
	out = n.Tick(3 * ack)
	require.Len(t, out, 1, "out of retries: 7 is skipped")
	assert.Equal(t, u(9), out[0].To)
	assert.False(t, out[0].Resent)
	assert.True(t, n.IsDown(u(7)))

	// 9 acknowledges: nothing more is sent, and an ack is evidence of life.
	n.MarkDown(u(1))
	assert.Empty(t, n.Step(3*ack+time.Millisecond, Message{Type: MsgElection, Ack: true, From: u(9), To: u(5), Cand: u(9), Round: 1, Hops: 2}))
	assert.Empty(t, n.Tick(time.Second))
	_, ok = n.Deadline()
	assert.False(t, ok, "no hop pending")
	n.Step(time.Second, Message{Type: MsgElected, Ack: true, From: u(1), To: u(5), Cand: u(9), Round: 1, Hops: 3})
	assert.False(t, n.IsDown(u(1)))

	// Stale rounds are acknowledged too: the sender must stop resending.
	n.Step(time.Second, msg(MsgElection, 9, 2, 1))
	out = n.Step(time.Second, msg(MsgElected, 9, 1, 4))
	require.Len(t, out, 1)
	assert.True(t, out[0].Ack)
}

// A down mark does not outlive its round: a live server whose
// acknowledgements were lost, skipped once, is back in the next round.
// Without this, ring-chaos had a run where a predecessor skipped a live
// participant forever and it restarted elections for the whole horizon.
func TestANewRoundForgetsDownMarks(t *testing.T) {
	n := ring5(t, Config{AckTimeout: time.Millisecond, Retries: 1000, HopBound: time.Millisecond})
	n.MarkDown(u(7))
	n.MarkDown(u(9))
	n.Step(0, msg(MsgElection, 3, 4, 1)) // a newer round reaches 5
	assert.False(t, n.IsDown(u(7)))
	assert.False(t, n.IsDown(u(9)))
	n.MarkDown(u(7))
	for i := 0; i < 1000 && n.Stats().Restarts == 0; i++ { // retransmissions, then the election timeout
		at, _ := n.Deadline()
		n.Tick(at)
	}
	require.Positive(t, n.Stats().Restarts)
	assert.False(t, n.IsDown(u(7)), "a restart forgets the marks too")
}
