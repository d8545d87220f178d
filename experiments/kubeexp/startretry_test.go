package kubeexp

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/experiments/backend/kube"
)

// A repetition whose electors' containers the runtime failed to start runs
// again, at most startTries times in all; any other outcome ends it.
func TestAgainOnFailedStartRunsAgainOnlyOnAFailedStart(t *testing.T) {
	env := &experiments.Env{Log: slog.New(slog.DiscardHandler)}
	failedStart := fmt.Errorf("%w: container elector of ns/p ended", kube.ErrStartFailed)
	for _, c := range []struct {
		name    string
		results []error // what each run returns, in turn
		runs    int
		err     error
	}{
		{"elected at once", []error{nil}, 1, nil},
		{"a failed start, then elected", []error{failedStart, nil}, 2, nil},
		{"a crash is not run again", []error{errors.New("crashed")}, 1, errors.New("crashed")},
		{"failed starts to the end", []error{failedStart, failedStart, failedStart, nil}, startTries, failedStart},
	} {
		runs := 0
		_, err := againOnFailedStart(env, func() (spreadResult, error) {
			runs++
			return spreadResult{}, c.results[runs-1]
		}, "case", c.name)
		assert.Equal(t, c.runs, runs, c.name)
		if c.err == nil {
			assert.NoError(t, err, c.name)
		} else {
			assert.EqualError(t, err, c.err.Error(), c.name)
		}
	}
}
