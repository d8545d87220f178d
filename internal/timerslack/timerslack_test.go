package timerslack

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Out of range is refused by name and changes nothing; 0 leaves the slack
// alone. (That a value reaches every thread, cmd/ringnode's
// TestEveryThreadHasTheTimerSlack checks on a running server: Apply
// executes the program again.)
func TestApplyRefusesWhatItCannotUse(t *testing.T) {
	before, err := Get()
	require.NoError(t, err)
	for _, d := range []time.Duration{-time.Nanosecond, Max + time.Nanosecond, time.Hour} {
		assert.ErrorContains(t, Apply(d, os.Environ()), "timer slack "+d.String()+": want 0 (as inherited) to 5ms")
	}
	require.NoError(t, Apply(0, os.Environ()))
	after, err := Get()
	require.NoError(t, err)
	assert.Equal(t, before, after)
}
