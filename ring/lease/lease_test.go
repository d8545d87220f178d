package lease

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ms = time.Millisecond

var seven = []string{"a", "b", "c", "d", "e", "f", "g"}

func newLease(t *testing.T, members []string) *Lease {
	t.Helper()
	l, err := New("a", 300*ms)
	require.NoError(t, err)
	l.Members(members)
	return l
}

func TestAMajorityGrantsFromTheAsk(t *testing.T) {
	l := newLease(t, seven)
	assert.False(t, l.Valid(0))
	n := l.Ask(100 * ms)
	l.Confirmed(n, "b")
	l.Confirmed(n, "c")
	assert.False(t, l.Valid(150*ms), "3 of 7 is no majority")
	l.Confirmed(n, "d")
	assert.True(t, l.Valid(150*ms))
	assert.True(t, l.Valid(399*ms))
	assert.False(t, l.Valid(400*ms), "the term runs from the ask, not the answers")
	at, ok := l.Until()
	assert.True(t, ok)
	assert.Equal(t, 400*ms, at)
}

func TestAMinorityNeverGrants(t *testing.T) {
	for _, n := range []int{2, 4, 6, 7} {
		members := seven[:n]
		l := newLease(t, members)
		for now := time.Duration(0); now < time.Second; now += 100 * ms {
			r := l.Ask(now)
			for _, m := range members[1 : n/2] { // with self: half, rounded down
				l.Confirmed(r, m)
			}
			assert.False(t, l.Valid(now), "n=%d", n)
		}
	}
}

func TestARingOfOneGrantsItself(t *testing.T) {
	l := newLease(t, []string{"a"})
	l.Ask(0)
	assert.True(t, l.Valid(299*ms))
}

func TestStrangersDuplicatesAndOldRoundsDoNotCount(t *testing.T) {
	l := newLease(t, seven)
	n := l.Ask(0)
	for range 3 {
		l.Confirmed(n, "b") // one member, three answers
	}
	l.Confirmed(n, "x")
	l.Confirmed(n, "y")
	l.Confirmed(n+1, "c") // a round not asked
	assert.False(t, l.Valid(1*ms))

	// A round so old it was forgotten no longer counts.
	for range keep {
		l.Ask(0)
	}
	l.Confirmed(n, "c")
	l.Confirmed(n, "d")
	assert.False(t, l.Valid(1*ms))
}

func TestANewMembershipDropsOpenRoundsButKeepsTheLease(t *testing.T) {
	l := newLease(t, seven)
	n := l.Ask(0)
	for _, m := range []string{"b", "c", "d"} {
		l.Confirmed(n, m)
	}
	require.True(t, l.Valid(10*ms))
	open := l.Ask(100 * ms)
	l.Members(seven[:6])
	assert.True(t, l.Valid(299*ms), "granted by a majority of the ring as it was")
	for _, m := range []string{"b", "c", "d"} {
		l.Confirmed(open, m)
	}
	assert.False(t, l.Valid(350*ms), "a round asked under the old membership")

	// Not a member: no lease can be granted.
	l.Members([]string{"b", "c", "d"})
	r := l.Ask(400 * ms)
	for _, m := range []string{"b", "c", "d"} {
		l.Confirmed(r, m)
	}
	assert.False(t, l.Valid(401*ms))
}

func TestALateAnswerNeverShortensTheLease(t *testing.T) {
	l := newLease(t, []string{"a", "b", "c"})
	early := l.Ask(0)
	late := l.Ask(200 * ms)
	l.Confirmed(late, "b")
	assert.True(t, l.Valid(499*ms))
	l.Confirmed(early, "c")
	at, _ := l.Until()
	assert.Equal(t, 500*ms, at)
}

func TestNewRefusesANonPositiveTerm(t *testing.T) {
	_, err := New("a", 0)
	assert.ErrorContains(t, err, "term")
}
