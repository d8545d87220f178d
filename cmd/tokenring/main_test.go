package main

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echo is a ring of one: every token written comes straight back, and
// the tokens are counted.
type echo struct {
	buf    bytes.Buffer
	tokens int
}

func (e *echo) Write(p []byte) (int, error) {
	e.tokens++
	return e.buf.Write(p)
}

func (e *echo) Read(p []byte) (int, error) { return e.buf.Read(p) }

// Each timed trip follows warm untimed ones, and only the timed trips
// past the 10 that warm the ring up are reported.
func TestOriginateTimesTheTripAfterTheWarmOnes(t *testing.T) {
	for _, warm := range []int{0, 1, 3} {
		var ring echo
		var results strings.Builder
		require.NoError(t, originate(&ring, &ring, &results, 5, 0, warm))
		assert.Equal(t, (5+10)*(warm+1), ring.tokens, "warm=%d: tokens sent", warm)
		lines := strings.Fields(results.String())
		require.Len(t, lines, 5, "warm=%d: one line per timed trip", warm)
		for _, l := range lines {
			ns, err := strconv.ParseInt(l, 10, 64)
			require.NoError(t, err)
			assert.Positive(t, ns)
		}
	}
}

// A ring that breaks mid-trip is an error naming the round.
func TestOriginateReportsABrokenRing(t *testing.T) {
	err := originate(strings.NewReader(""), io.Discard, io.Discard, 3, 0, 1)
	assert.ErrorContains(t, err, "round 0")
}

// A slack the relays cannot use is refused by name before anything
// listens or executes again; a value without a unit is the flag
// package's error.
func TestBadTimerSlackIsRefused(t *testing.T) {
	for value, want := range map[string]string{
		"-1ms":                  "--timer-slack: timer slack -1ms: want 0 (as inherited) to 5ms",
		"6ms":                   "--timer-slack: timer slack 6ms: want 0 (as inherited) to 5ms",
		"1":                     `invalid value "1" for flag -timer-slack`,
		"9223372036854775808ns": `invalid value "9223372036854775808ns" for flag -timer-slack`,
	} {
		err := run(context.Background(), []string{"--listen", "127.0.0.1:0", "--next", "127.0.0.1:1", "--timer-slack", value})
		assert.ErrorContains(t, err, want, value)
	}
}
