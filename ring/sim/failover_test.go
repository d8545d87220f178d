package sim

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/membership"
)

func TestFailoverElectsAndPushesMetadata(t *testing.T) {
	for _, n := range []int{2, 16, 256} {
		c := DefaultFailover
		c.N = n
		res, err := Failover(c, 7)
		require.NoError(t, err)
		assert.True(t, res.NewIsMaxLive, "n=%d: %+v", n, res)
		assert.Equal(t, 1, res.Coordinators, "n=%d", n)
		assert.NotEqual(t, res.Killed, res.NewCoordinator)
		// Detection: the detector's timeout after the last heartbeat heard.
		assert.Greater(t, res.Detect, c.Suspect-c.Heartbeat, "n=%d", n)
		assert.Less(t, res.Detect, c.Suspect+c.Heartbeat, "n=%d", n)
		// The last to learn the winner is its predecessor, just before
		// ELECTED returns to it; the metadata push follows the return.
		assert.GreaterOrEqual(t, res.AllKnow, res.Detect, "n=%d", n)
		assert.LessOrEqual(t, res.AllKnow, res.Detect+res.Propagation, "n=%d", n)
		assert.GreaterOrEqual(t, res.Metadata, res.Detect+res.Propagation, "n=%d", n)
		// A fault-free failover changes the metadata once: one push to
		// each survivor but the winner. Of two servers the survivor is no
		// majority: the dead one stays a member and is pushed to as well.
		pushes := n - 2
		if n == 2 {
			pushes = 1
		}
		assert.Equal(t, pushes, res.Counts.MetaPushes, "n=%d", n)
		if n > 2 {
			assert.Positive(t, res.Propagation, "n=%d", n)
			// Every survivor but the winner forwards ELECTED once.
			assert.Equal(t, n-1, res.Counts.Of(ring.MsgElected), "n=%d", n)
			assert.GreaterOrEqual(t, res.Counts.Of(ring.MsgElection), n-1, "n=%d", n)
		}
	}
}

func TestFailoverIsDeterministic(t *testing.T) {
	a, err := Failover(DefaultFailover, 3)
	require.NoError(t, err)
	b, err := Failover(DefaultFailover, 3)
	require.NoError(t, err)
	assert.Equal(t, a, b)
	c, err := Failover(DefaultFailover, 4)
	require.NoError(t, err)
	assert.NotEqual(t, a.Propagation, c.Propagation, "another seed draws other link delays")
}

func TestFailoverRejectsOneServer(t *testing.T) {
	c := DefaultFailover
	c.N = 1
	_, err := Failover(c, 1)
	assert.ErrorContains(t, err, "at least 2")
}

func TestMetaNeedsTheUIDOrder(t *testing.T) {
	meta, err := membership.New(1, 1, Addr(0), 2, []string{Addr(0), Addr(1), Addr(2)})
	require.NoError(t, err)
	reversed := slices.Clone(meta.Ring().Order())
	slices.Reverse(reversed)
	r, err := ring.NewRing(reversed)
	require.NoError(t, err)
	_, err = New(Config{Meta: meta, Ring: r})
	assert.ErrorContains(t, err, "UID order")
}
