package pick

import (
	"errors"
	"fmt"
	"math"
)

// CheckWeights is the one check of balancing weights, wherever they come
// from (a feed message, a static list, an experiment's weight set): finite
// and non-negative, with a finite sum, and not all zero unless allowZero
// (every upstream drained).
func CheckWeights(weights []float64, allowZero bool) error {
	sum := 0.0
	for i, w := range weights {
		if bad(w) {
			return fmt.Errorf("weight[%d] = %v: must be a finite number ≥ 0", i, w)
		}
		sum += w
	}
	switch {
	case math.IsInf(sum, 0):
		// Each finite, yet their sum is not: every picker divides by
		// the sum or subtracts it.
		return fmt.Errorf("the %d weights sum past the largest float64: scale them down", len(weights))
	case allowZero || sum > 0:
	case len(weights) == 0:
		return errors.New("no weights: no worker could take a request")
	default:
		return fmt.Errorf("all %d weights are zero: no worker could take a request", len(weights))
	}
	return nil
}

func bad(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) || x < 0 }
