package coordinator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ringside/ringside/ring/membership"
)

const ms = time.Millisecond

func bootstrapped(t *testing.T, self string) *Coordinator {
	t.Helper()
	c, err := New(self, 700*ms)
	require.NoError(t, err)
	up, err := c.Bootstrap(0, 2)
	require.NoError(t, err)
	require.NotNil(t, up.Meta)
	require.True(t, c.Active())
	return c
}

func TestJoinAdmitsAndVersions(t *testing.T) {
	c := bootstrapped(t, "10.0.0.1:7000")
	ans, red, up, err := c.Join(10*ms, "10.0.0.2:7000")
	require.NoError(t, err)
	assert.Empty(t, red)
	require.NotNil(t, up.Meta, "a new member changes the metadata")
	assert.Equal(t, up.Meta, ans)
	assert.Equal(t, uint64(2), ans.Version)
	assert.True(t, ans.Has("10.0.0.2:7000"))

	// Joining again (a restarted server) answers the same metadata and
	// changes nothing.
	ans2, _, up2, err := c.Join(20*ms, "10.0.0.2:7000")
	require.NoError(t, err)
	assert.Nil(t, up2.Meta)
	assert.Equal(t, ans, ans2)

	_, _, _, err = c.Join(30*ms, "no-port")
	assert.ErrorContains(t, err, "join: addr")
	assert.Equal(t, uint64(2), c.Meta().Version, "a bad join leaves the metadata alone")
}

func TestFollowerRedirects(t *testing.T) {
	c, err := New("10.0.0.2:7000", 700*ms)
	require.NoError(t, err)
	_, red, _, err := c.Join(0, "10.0.0.3:7000")
	require.NoError(t, err)
	assert.Empty(t, red, "no metadata yet: nobody to name")
	m, err := membership.New(1, 3, "10.0.0.1:7000", 2, []string{"10.0.0.1:7000", "10.0.0.2:7000"})
	require.NoError(t, err)
	require.True(t, c.Install(0, m))
	assert.False(t, c.Active())
	ans, red, up, err := c.Join(0, "10.0.0.3:7000")
	require.NoError(t, err)
	assert.Nil(t, ans)
	assert.Nil(t, up.Meta)
	assert.Equal(t, "10.0.0.1:7000", red)
	assert.False(t, c.Install(0, m), "the same version is not newer")
}

func TestSilentMembersAreRemoved(t *testing.T) {
	c := bootstrapped(t, "10.0.0.1:7000")
	for _, a := range []string{"10.0.0.2:7000", "10.0.0.3:7000", "10.0.0.4:7000"} {
		_, _, _, err := c.Join(0, a)
		require.NoError(t, err)
	}
	at, ok := c.Deadline()
	require.True(t, ok)
	assert.Equal(t, 700*ms, at)
	// Two keep acking, one goes quiet.
	for now := 100 * ms; now <= 600*ms; now += 100 * ms {
		c.Heard(now, "10.0.0.2:7000")
		c.Heard(now, "10.0.0.4:7000")
		c.Heard(now, "10.0.0.9:7000") // not a member: ignored
		up, err := c.Tick(now)
		require.NoError(t, err)
		require.Nil(t, up.Meta)
	}
	at, _ = c.Deadline()
	assert.Equal(t, 700*ms, at, "the silent member's deadline comes first")
	up, err := c.Tick(700 * ms)
	require.NoError(t, err)
	require.NotNil(t, up.Meta)
	assert.Equal(t, []string{"10.0.0.3:7000"}, up.Removed)
	assert.False(t, up.Meta.Has("10.0.0.3:7000"))
	assert.Equal(t, uint64(5), up.Meta.Version)
	at, _ = c.Deadline()
	assert.Equal(t, 1300*ms, at, "the removed member's detector is gone")
}

func TestWonTakesOverOnce(t *testing.T) {
	old, err := membership.New(1, 4, "10.0.0.1:7000", 2, []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"})
	require.NoError(t, err)
	c, err := New("10.0.0.3:7000", 700*ms)
	require.NoError(t, err)
	_, err = c.Won(0, 2)
	require.ErrorContains(t, err, "no metadata")
	require.True(t, c.Install(0, old))

	up, err := c.Won(50*ms, 2)
	require.NoError(t, err)
	require.NotNil(t, up.Meta)
	assert.Equal(t, []string{"10.0.0.1:7000"}, up.Removed)
	assert.Equal(t, "10.0.0.3:7000", up.Meta.Coordinator)
	assert.Equal(t, uint64(2), up.Meta.Round)
	assert.Equal(t, uint64(1), up.Meta.Version)
	assert.True(t, c.Active())
	at, ok := c.Deadline()
	require.True(t, ok)
	assert.Equal(t, 750*ms, at, "members are tracked from the takeover")

	up, err = c.Won(60*ms, 2)
	require.NoError(t, err)
	assert.Nil(t, up.Meta, "winning the same round again changes nothing")

	// A newer coordinator's metadata deactivates the role.
	newer, err := membership.New(3, 1, "10.0.0.2:7000", 2, []string{"10.0.0.2:7000", "10.0.0.3:7000"})
	require.NoError(t, err)
	require.True(t, c.Install(70*ms, newer))
	assert.False(t, c.Active())
	_, ok = c.Deadline()
	assert.False(t, ok)
}

func TestNewRefusesBadConfig(t *testing.T) {
	_, err := New("x", time.Second)
	assert.ErrorContains(t, err, "self")
	_, err = New("10.0.0.1:1", 0)
	assert.ErrorContains(t, err, "suspect timeout")
}

// Same inputs, same outputs: the core has no hidden clock or randomness.
func TestDeterministic(t *testing.T) {
	run := func() []string {
		c := bootstrapped(t, "10.0.0.1:7000")
		var log []string
		for _, a := range []string{"10.0.0.5:1", "10.0.0.4:1", "10.0.0.3:1", "10.0.0.2:1"} {
			_, _, _, err := c.Join(0, a)
			require.NoError(t, err)
		}
		for now := time.Duration(0); now < 2*time.Second; now += 50 * ms {
			c.Heard(now, "10.0.0.2:1")
			c.Heard(now, "10.0.0.3:1")
			if now < 300*ms {
				c.Heard(now, "10.0.0.4:1")
			}
			up, err := c.Tick(now)
			require.NoError(t, err)
			if up.Meta != nil {
				log = append(log, string(up.Meta.Encode()))
			}
		}
		return log
	}
	a := run()
	assert.Equal(t, a, run())
	require.Len(t, a, 2, "one silent member at 700 ms, another at 950 ms (a majority always acks)")
}

// After a partition heals, the smaller ring yields to the larger, and
// between rings of one size the larger coordinator UID wins: never both.
func TestYieldsIsAnOrder(t *testing.T) {
	meta := func(coord string, servers ...string) *membership.Metadata {
		m, err := membership.New(2, 1, coord, 2, servers)
		require.NoError(t, err)
		return m
	}
	a, b, c, d := "10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000", "10.0.0.4:7000"
	majority, minority := meta(a, a, b, d), meta(c, c)
	assert.True(t, Yields(minority, majority))
	assert.False(t, Yields(majority, minority))

	x, y := meta(a, a, b), meta(c, c, d)
	assert.NotEqual(t, Yields(x, y), Yields(y, x), "one of two same-size rings yields")
	assert.False(t, Yields(x, x))
	assert.True(t, Yields(nil, x))
	assert.False(t, Yields(x, nil))

	// A server that adopts the ring it joined takes its metadata even when
	// its own ring had a newer round.
	r, err := New(c, 700*ms)
	require.NoError(t, err)
	require.True(t, r.Install(0, meta(c, c)))
	require.True(t, r.Active())
	older, err := membership.New(1, 5, a, 2, []string{a, b, c, d})
	require.NoError(t, err)
	assert.False(t, r.Install(10*ms, older), "rounds order metadata within a ring")
	r.Adopt(10*ms, older)
	assert.Equal(t, older, r.Meta())
	assert.False(t, r.Active())
}
