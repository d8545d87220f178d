package timerslack

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The monitor's setting joins GODEBUG's first entry (the one the runtime
// reads), leaves someone's own schedtrace alone, and is idempotent, so a
// program executed with it does not execute itself again.
func TestWithMonitorAwake(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{nil, []string{"GODEBUG=schedtrace=2147483647"}},
		{[]string{"A=1"}, []string{"A=1", "GODEBUG=schedtrace=2147483647"}},
		{[]string{"GODEBUG="}, []string{"GODEBUG=schedtrace=2147483647"}},
		{[]string{"GODEBUG=gctrace=1,", "B=2"}, []string{"GODEBUG=gctrace=1,schedtrace=2147483647", "B=2"}},
		{[]string{"GODEBUG=schedtrace=0"}, []string{"GODEBUG=schedtrace=0"}},
		{[]string{"GODEBUG=x=1", "GODEBUG=y=2"}, []string{"GODEBUG=x=1,schedtrace=2147483647", "GODEBUG=y=2"}},
	} {
		got := WithMonitorAwake(c.in)
		assert.Equal(t, c.want, got, c.in)
		assert.Equal(t, got, WithMonitorAwake(got), "idempotent")
		assert.Equal(t, godebug(got), godebug(WithMonitorAwake(got)))
	}
}
