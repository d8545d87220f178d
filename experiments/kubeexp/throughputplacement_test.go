package kubeexp

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A forced placement that did not hold is forced again, each time
// logged, up to forceTries in all; any other error ends it at once.
func TestAForcedPlacementThatDidNotHoldIsForcedAgain(t *testing.T) {
	notAsForced := fmt.Errorf("%w: app0-1 leads app0 on worker2, forced onto worker1", errNotAsForced)
	other := errors.New("no such node")
	for _, tc := range []struct {
		name      string
		results   []error
		wantTries int
		wantErr   error
	}{
		{"held at once", []error{nil}, 1, nil},
		{"held the second time", []error{notAsForced, nil}, 2, nil},
		{"held the last time", []error{notAsForced, notAsForced, nil}, forceTries, nil},
		{"never held", []error{notAsForced, notAsForced, notAsForced, nil}, forceTries, errNotAsForced},
		{"another error is not retried", []error{other, nil}, 1, other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			tries := 0
			out, err := untilAsForced(slog.New(slog.NewTextHandler(&logged, nil)), "balanced", func() (int, error) {
				tries++
				return tries, tc.results[tries-1]
			})
			assert.Equal(t, tc.wantTries, tries)
			assert.Equal(t, tries, out, "the last try's rows")
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			// Each try but the first follows a logged failure.
			assert.Equal(t, tries-1, strings.Count(logged.String(), "forcing it again"))
		})
	}
}
