package kubeexp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ringside/ringside/bld/balance"
)

// client-go's span for a 2-s lease (retry period 500 ms): 1.5 s to 4.2 s.
func TestClientGoReelection(t *testing.T) {
	lo, hi := clientGoReelection(2 * time.Second)
	assert.Equal(t, 1500*time.Millisecond, lo)
	assert.Equal(t, 4200*time.Millisecond, hi)
}

// The report's expected column: client-go's span for the default, a
// floor for cle-balanced, nothing for the rest.
func TestExpectedReelection(t *testing.T) {
	assert.Equal(t, "1500–4200", expectedReelection(balance.Default, 2*time.Second))
	assert.Equal(t, "≥ 3000", expectedReelection(balance.CLEBalanced, 4*time.Second))
	assert.Equal(t, "—", expectedReelection(balance.BLD, 2*time.Second))
}
