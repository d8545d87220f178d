package coordinator

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/ring/membership"
)

// ringOf returns a coordinating role over n members (self the first, in
// UID order) with replicas copies, everyone heard at 0.
func ringOf(t *testing.T, n, replicas int, guard bool) (*Coordinator, []string) {
	t.Helper()
	m, err := membership.New(1, 1, "10.0.0.1:7000", replicas, addrs(n))
	require.NoError(t, err)
	c, err := New(m.Servers[0], 700*ms)
	require.NoError(t, err)
	if guard {
		c.Guard()
	}
	// Coordinating: the metadata names a member as coordinator, so take
	// over from it in the next round (it is removed unless the rules say
	// otherwise, which a whole ring never does).
	m, err = membership.New(1, 1, m.Servers[1], replicas, m.Servers)
	require.NoError(t, err)
	require.True(t, c.Install(0, m))
	return c, m.Servers
}

func addrs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.0.0.%d:7000", i+1)
	}
	return out
}

// silence keeps every member but the quiet ones acking until after the
// suspect timeout, and returns what the last Tick did.
func silence(t *testing.T, c *Coordinator, quiet ...string) Update {
	t.Helper()
	var up Update
	for now := 100 * ms; now <= 2*time.Second; now += 100 * ms {
		for _, s := range c.Meta().Servers {
			if !slices.Contains(quiet, s) {
				c.Heard(now, s)
			}
		}
		u, err := c.Tick(now)
		require.NoError(t, err)
		if u.Meta != nil {
			up = u
		}
		// A removal held back waits: the next Tick is due later, never
		// now (a server would spin on its timer).
		at, ok := c.Deadline()
		require.True(t, ok)
		require.Greater(t, at, now)
	}
	return up
}

func TestAMinorityRemovesNobody(t *testing.T) {
	for _, n := range []int{3, 4, 7, 9} {
		c, _ := ringOf(t, n, 2, false)
		up, err := c.Won(0, 2)
		require.NoError(t, err)
		require.NotNil(t, up.Meta)
		// The old coordinator left; of the rest, half or more go quiet
		// (the other side of a cut), self not among them.
		rest := slices.DeleteFunc(slices.Clone(up.Meta.Servers), func(s string) bool { return s == c.self })
		quiet := rest[:(len(rest)+2)/2]
		require.LessOrEqual(t, 2*(len(up.Meta.Servers)-len(quiet)), len(up.Meta.Servers))
		assert.Nil(t, silence(t, c, quiet...).Meta, "n=%d: %d of %d quiet: nobody leaves", n, len(quiet), len(up.Meta.Servers))
	}
}

func TestAMajorityRemovesTheRest(t *testing.T) {
	c, s := ringOf(t, 7, 2, false)
	_, err := c.Won(0, 2)
	require.NoError(t, err)
	// 6 members left; 2 go quiet: 4 of 6 stay, a majority.
	quiet := []string{s[2], s[4]}
	up := silence(t, c, quiet...)
	require.NotNil(t, up.Meta)
	assert.ElementsMatch(t, quiet, up.Removed)
}

func TestWonKeepsTheOldCoordinatorOfATwoServerRing(t *testing.T) {
	c, s := ringOf(t, 2, 2, false)
	require.Equal(t, c.self, s[0])
	up, err := c.Won(0, 2)
	require.NoError(t, err)
	require.NotNil(t, up.Meta)
	assert.Empty(t, up.Removed, "one of two is no majority: the other may only be cut off")
	assert.Equal(t, s, up.Meta.Servers)
	assert.Equal(t, c.self, up.Meta.Coordinator)
}

// rebalancedAll reports every member rebalanced under the current
// metadata.
func rebalancedAll(c *Coordinator) {
	for _, s := range c.Meta().Servers {
		c.Rebalanced(s, c.Meta().Epoch())
	}
}

func TestTheGuardKeepsTheLastHolderOfAnArc(t *testing.T) {
	c, _ := ringOf(t, 9, 2, true)
	up, err := c.Won(0, 2) // s[1], the old coordinator, leaves
	require.NoError(t, err)
	require.NotNil(t, up.Meta)
	assert.Nil(t, c.Held(), "nobody has reported a rebalance yet")
	rebalancedAll(c)
	require.Same(t, c.Meta(), c.Held())
	servers := c.Meta().Servers // 8: s[0], s[2], …, s[8]
	require.Len(t, servers, 8)

	// Three ring neighbours go quiet: the arc the first of them owns has
	// all three as its holders, so they stay; the others may not leave
	// either (each holds that arc). 5 of 8 would have stayed.
	quiet := servers[3:6]
	assert.Nil(t, silence(t, c, quiet...).Meta, "every holder of an arc is quiet: none of them leaves")

	// Two neighbours and one apart: every arc keeps a holder.
	c, _ = ringOf(t, 9, 2, true)
	_, err = c.Won(0, 2)
	require.NoError(t, err)
	rebalancedAll(c)
	quiet = []string{servers[3], servers[4], servers[7]}
	up = silence(t, c, quiet...)
	require.NotNil(t, up.Meta)
	assert.ElementsMatch(t, quiet, up.Removed)
}

func TestTheGuardJudgesByTheHeldMetadata(t *testing.T) {
	c, _ := ringOf(t, 9, 2, true)
	rebalancedAll(c)
	held := c.Held()
	require.NotNil(t, held)
	// The takeover removes the old coordinator; until every member has
	// moved its data for that, the holders are the held metadata's.
	up, err := c.Won(0, 2)
	require.NoError(t, err)
	require.NotNil(t, up.Meta)
	require.Same(t, held, c.Held())
	old := held.Coordinator
	i := slices.Index(held.Servers, old)
	// The old coordinator's arc was held by it and its two successors;
	// with it gone, those two are the arc's last holders. The new
	// metadata names a third server responsible, which has not pulled.
	quiet := []string{held.Servers[(i+1)%9], held.Servers[(i+2)%9]}
	assert.Nil(t, silence(t, c, quiet...).Meta, "the old coordinator's arc would lose every holder")

	// Reports under an older epoch do not count; under the current one
	// they do, and then the guard judges by the new metadata.
	for _, s := range c.Meta().Servers {
		c.Rebalanced(s, held.Epoch())
	}
	require.Same(t, held, c.Held())
	rebalancedAll(c)
	require.Same(t, c.Meta(), c.Held())
	up = silence(t, c, quiet...)
	require.NotNil(t, up.Meta)
	assert.ElementsMatch(t, quiet, up.Removed)
}

func TestReportsFromStrangersAreIgnored(t *testing.T) {
	c, _ := ringOf(t, 3, 2, true)
	c.Rebalanced("10.9.9.9:7000", c.Meta().Epoch())
	rebalancedAll(c)
	assert.NotContains(t, c.rebalanced, "10.9.9.9:7000")
	assert.Same(t, c.Meta(), c.Held())
}

// Cut off with two others of seven, a coordinator sees the other four fall
// silent one heartbeat apart. Their detectors fire one by one; it must not
// remove the first three (four of seven would "stay", one of them already
// silent) and then the last (three of four).
func TestACoordinatorCutOffRemovesNobodyAFewAtATime(t *testing.T) {
	c, s := ringOf(t, 7, 2, false)
	_, err := c.Won(0, 2) // s[1] leaves: six members
	require.NoError(t, err)
	side := []string{s[0], s[2], s[3]}
	other := []string{s[4], s[5], s[6]}
	for now := 10 * ms; now <= 3*time.Second; now += 10 * ms {
		for _, m := range side {
			c.Heard(now, m)
		}
		for i, m := range other {
			if now <= time.Duration(i)*100*ms {
				c.Heard(now, m)
			}
		}
		up, err := c.Tick(now)
		require.NoError(t, err)
		require.Nil(t, up.Meta, "at %v: removed %v", now, up.Removed)
	}
}
