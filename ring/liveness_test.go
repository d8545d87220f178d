package ring

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// MarkUp finds the member among those marked down (not by its index, the
// fast path), so the marks, the count of live members and the neighbours
// must agree whatever order members go down and come back in.
func TestDownMarksComeAndGoInAnyOrder(t *testing.T) {
	r, err := NewRing([]UID{u(1), u(3), u(5), u(7), u(9)})
	require.NoError(t, err)
	var l liveness
	l.self = u(5)
	require.NoError(t, l.setRing(r))

	l.MarkDown(u(7))
	l.MarkDown(u(9))
	l.MarkDown(u(7)) // twice: counted once
	l.MarkDown(u(5)) // self: never down
	l.MarkUp(u(3))   // not down: no change
	l.MarkUp(u(42))  // not a member: no change
	assert.Equal(t, 3, l.liveMembers())
	assert.Equal(t, u(1), l.successor(), "7 and 9 skipped")

	l.MarkUp(u(7)) // the first marked comes back first
	assert.False(t, l.IsDown(u(7)))
	assert.True(t, l.IsDown(u(9)))
	assert.Equal(t, 4, l.liveMembers())
	assert.Equal(t, u(7), l.successor())

	l.MarkDown(u(1))
	l.MarkDown(u(3))
	assert.Equal(t, u(7), l.predecessor(), "3 and 1 down, 9 still down: round to 7")
	l.MarkUp(u(3))
	l.MarkUp(u(9))
	l.MarkUp(u(9))
	assert.Equal(t, 4, l.liveMembers())
	assert.True(t, l.IsDown(u(1)))
	assert.Equal(t, u(3), l.predecessor())

	l.forgetDown()
	l.MarkUp(u(1)) // no longer down: nothing to lift
	assert.Equal(t, 5, l.liveMembers())
	assert.False(t, l.IsDown(u(1)))
}

// Past scanDown members down, MarkUp looks the sender up by index: the
// same bookkeeping.
func TestManyDownMarks(t *testing.T) {
	var order []UID
	for k := range 3 * scanDown {
		order = append(order, u(uint64(k)))
	}
	r, err := NewRing(order)
	require.NoError(t, err)
	var l liveness
	l.self = u(0)
	require.NoError(t, l.setRing(r))
	for k := 1; k < 2*scanDown; k++ {
		l.MarkDown(u(uint64(k)))
	}
	require.Equal(t, 3*scanDown-(2*scanDown-1), l.liveMembers())
	for k := 2 * scanDown; k > 0; k-- { // 2·scanDown was never down
		l.MarkUp(u(uint64(k)))
		l.MarkUp(u(uint64(k)))
	}
	assert.Equal(t, 3*scanDown, l.liveMembers())
	assert.Empty(t, l.downAt)
	for k := range 3 * scanDown {
		assert.False(t, l.IsDown(u(uint64(k))))
	}
	assert.Equal(t, u(1), l.successor())
}
