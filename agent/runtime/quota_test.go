package runtime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestQuotaStopsOnlyOnceItIsUsed(t *testing.T) {
	ms := time.Millisecond
	one := cpuQuota{quota: 20 * ms, period: 100 * ms, threads: 1}
	two := cpuQuota{quota: 20 * ms, period: 100 * ms, threads: 2}
	for _, c := range []struct {
		name       string
		q          cpuQuota
		used, left time.Duration
		halt       bool
		wait       time.Duration
	}{
		{"fresh period: the whole quota at full speed", one, 0, 100 * ms, false, 20 * ms},
		{"two threads spend it twice as fast", two, 0, 100 * ms, false, 10 * ms},
		{"a worker kept waiting by the machine keeps its rest", one, 5 * ms, 90 * ms, false, 15 * ms},
		{"no look past the period's end", one, 0, 7 * ms, false, 7 * ms},
		{"a nearly spent quota is looked at a millisecond on", one, 19*ms + 900*time.Microsecond, 50 * ms, false, ms},
		{"spent: stopped until the period ends", one, 20 * ms, 60 * ms, true, 60 * ms},
		{"overshot: stopped all the same", two, 31 * ms, 40 * ms, true, 40 * ms},
	} {
		halt, wait := c.q.next(c.used, c.left)
		assert.Equal(t, c.halt, halt, c.name)
		assert.Equal(t, c.wait, wait, c.name)
	}
}
