package rateclock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRejectsRatesOutOfRange(t *testing.T) {
	for _, r := range []float64{0, -1, 0.001, 1000} {
		_, err := New(r)
		assert.Error(t, err, "%v", r)
	}
}

// A clock at rate r reads r seconds per real second from its start, and
// waits d of its time as d/r of real time.
func TestRateScalesReadingsAndWaits(t *testing.T) {
	for _, rate := range []float64{0.5, 2} {
		c, err := New(rate)
		require.NoError(t, err)
		assert.Equal(t, c.start, c.at(c.start))
		assert.Equal(t, time.Duration(rate*float64(10*time.Second)), c.at(c.start.Add(10*time.Second)).Sub(c.start), "rate %v", rate)
		assert.Equal(t, time.Duration(float64(4*time.Second)/rate), c.real(4*time.Second), "rate %v", rate)

		// A timer of d on the clock has not fired before d of the clock.
		before := c.Now()
		<-c.NewTimer(20 * time.Millisecond).C()
		assert.GreaterOrEqual(t, c.Since(before), 20*time.Millisecond, "rate %v", rate)
		tm := c.NewTimer(time.Hour)
		tm.Reset(10 * time.Millisecond)
		before = c.Now()
		<-tm.C()
		assert.GreaterOrEqual(t, c.Since(before), 10*time.Millisecond, "rate %v: Reset is scaled too", rate)
	}
}
