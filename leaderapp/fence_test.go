package leaderapp

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fencing rule: terms in, accept or refuse out.
func TestFenceRefusesOlderTerms(t *testing.T) {
	var f Fence
	for _, c := range []struct {
		term   uint64
		admit  bool
		newest uint64
	}{
		{0, true, 0}, // the first holder's term is 0
		{3, true, 3}, // a newer leader
		{3, true, 3}, // the same leader again
		{2, false, 3},
		{0, false, 3},
		{4, true, 4},
		{^uint64(0), true, ^uint64(0)},
		{4, false, ^uint64(0)},
	} {
		err := f.Admit(c.term)
		if c.admit {
			assert.NoError(t, err, "term %d", c.term)
		} else {
			var fe *FencedError
			require.True(t, errors.As(err, &fe), "term %d: %v", c.term, err)
			assert.Equal(t, FencedError{Term: c.term, Newest: c.newest}, *fe)
			assert.Contains(t, err.Error(), "no longer leads")
		}
		assert.Equal(t, c.newest, f.Newest(), "term %d", c.term)
	}
}

// A successor's writes outrank its predecessor's whatever their sequence
// numbers: a deposed leader numbering ahead cannot hide them.
func TestVersionOrdersByTermThenSequence(t *testing.T) {
	assert.True(t, Version{1, 100}.Less(Version{2, 1}))
	assert.True(t, Version{2, 1}.Less(Version{2, 2}))
	assert.False(t, Version{2, 2}.Less(Version{2, 2}))
	assert.False(t, Version{3, 0}.Less(Version{2, 9}))

	s := NewStore(0)
	ok, err := s.Apply("k", []byte("stale"), Version{Term: 1, Seq: 100})
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = s.Apply("k", []byte("successor"), Version{Term: 2, Seq: 7})
	require.NoError(t, err)
	assert.True(t, ok)
	ok, _ = s.Apply("k", []byte("late stale"), Version{Term: 1, Seq: 101})
	assert.False(t, ok)
	val, v, _ := s.Get("k")
	assert.Equal(t, "successor", string(val))
	assert.Equal(t, Version{2, 7}, v)
}
