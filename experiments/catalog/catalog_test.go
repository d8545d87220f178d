package catalog

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ringside/ringside/experiments"
)

// Every experiment's CSV comes from a row type, and every row carries the
// seed of its repetition, so any row can be rerun on its own.
func TestEveryExperimentHasARowTypeWithASeed(t *testing.T) {
	for _, e := range New().All() {
		name := e.Spec().Name
		assert.NotPanics(t, func() {
			cols := experiments.Columns(e)
			assert.True(t, slices.Contains(cols, "seed"), "%s: no seed column in %v", name, cols)
		}, name)
	}
}
