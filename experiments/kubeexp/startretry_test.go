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

// kube-split-brain nests its set-up-again on errLeadMoved inside the run
// again on a failed start: each bounds its own runs, and the other's
// error passes through it.
func TestAgainOnNestsWithTheFailedStart(t *testing.T) {
	env := &experiments.Env{Log: slog.New(slog.DiscardHandler)}
	failedStart := fmt.Errorf("%w: container elector of ns/p ended", kube.ErrStartFailed)
	results := []error{errLeadMoved, failedStart, errLeadMoved, errLeadMoved, errLeadMoved, errors.New("crashed")}
	runs := 0
	_, err := againOnFailedStart(env, func() (splitRow, error) {
		return againOn(env, errLeadMoved, setupTries, "set up again", func() (splitRow, error) {
			runs++
			return splitRow{}, results[runs-1]
		})
	})
	// lead moved, failed start (out of the inner loop, run again by the
	// outer), then three lead moves: the inner loop's bound ends it.
	assert.Equal(t, 5, runs)
	assert.ErrorIs(t, err, errLeadMoved)
}
