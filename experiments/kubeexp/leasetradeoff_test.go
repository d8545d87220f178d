package kubeexp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// client-go's span for a 2-s lease (retry period 500 ms): 1.5 s to 4.2 s.
func TestClientGoReelection(t *testing.T) {
	lo, hi := clientGoReelection(2 * time.Second)
	assert.Equal(t, 1500*time.Millisecond, lo)
	assert.Equal(t, 4200*time.Millisecond, hi)
}
