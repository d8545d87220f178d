// Package rateclock is a clock that runs at a chosen rate of real time:
// the clock rate skew client-go's leader election documents it does not
// tolerate ("not tolerant to arbitrary clock skew rate"). An elector given
// one at rate 0.5 waits twice as long, in real time, for every deadline
// it sets itself — its renew deadline among them.
package rateclock

import (
	"fmt"
	"math"
	"time"

	"k8s.io/utils/clock"
)

// Clock reads start + rate × (real time since start) and scales every
// wait it is asked for by 1/rate.
type Clock struct {
	start time.Time
	rate  float64
}

var _ clock.WithTicker = (*Clock)(nil)

// New returns a clock running at rate (0.01 to 100) from now.
func New(rate float64) (*Clock, error) {
	if math.IsNaN(rate) || rate < 0.01 || rate > 100 {
		return nil, fmt.Errorf("clock rate %v: want 0.01 to 100", rate)
	}
	return &Clock{start: time.Now(), rate: rate}, nil
}

// real converts a span of this clock to real time.
func (c *Clock) real(d time.Duration) time.Duration { return time.Duration(float64(d) / c.rate) }

func (c *Clock) Now() time.Time { return c.at(time.Now()) }

// at is the clock's reading at the real instant t.
func (c *Clock) at(t time.Time) time.Time {
	return c.start.Add(time.Duration(float64(t.Sub(c.start)) * c.rate))
}

func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *Clock) After(d time.Duration) <-chan time.Time { return time.After(c.real(d)) }

func (c *Clock) Sleep(d time.Duration) { time.Sleep(c.real(d)) }

func (c *Clock) Tick(d time.Duration) <-chan time.Time {
	//nolint:staticcheck // the clock.Clock interface asks for Tick.
	return time.Tick(c.real(d))
}

func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	return &timer{Timer: clock.RealClock{}.NewTimer(c.real(d)), c: c}
}

func (c *Clock) NewTicker(d time.Duration) clock.Ticker {
	return clock.RealClock{}.NewTicker(c.real(d))
}

type timer struct {
	clock.Timer
	c *Clock
}

func (t *timer) Reset(d time.Duration) bool { return t.Timer.Reset(t.c.real(d)) }
