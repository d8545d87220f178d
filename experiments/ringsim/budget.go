package ringsim

import "math"

// minCellReps is the fewest repetitions a cell runs, however costly: two
// still show a spread, and the cells that stop there (LeLann, Bully and
// Chang–Roberts' worst case at n ≥ 512) vary little — LeLann not at all.
const minCellReps = 2

// cellPrecision is the standard error, relative to the mean, that a cell
// whose mean the report compares with an exact form reaches before it
// stops early.
const cellPrecision = 0.005

const maxMessagesUsage = "election messages per repetition, on average, that a cell may spend: once its election messages reach reps × this, " +
	"a cell stops — one whose mean is compared with an exact form only when that mean is known to 0.5 % — after at least 2 repetitions"

// cellBudget stops a simulated cell's repetitions early: the quadratic
// algorithms at large n must not hold up the rest, and a cell whose mean
// the report holds against an exact form (Chang–Roberts' n·H_n, say)
// must not lose the precision that comparison needs. It counts what was
// sent, not what the first repetition predicted — one Bully initiator
// sends n−1 messages or n², by where it stands.
type cellBudget struct {
	budget     float64
	precise    bool
	n          int
	sum, sumSq float64 // election messages and their squares: exact integers
}

func newCellBudget(reps, perRep int, precise bool) cellBudget {
	return cellBudget{budget: float64(reps) * float64(perRep), precise: precise}
}

// spend records a repetition's election messages and reports whether the
// cell is done.
func (b *cellBudget) spend(msgs int) bool {
	x := float64(msgs)
	b.n++
	b.sum += x
	b.sumSq += x * x
	switch {
	case b.n < minCellReps || b.sum < b.budget:
		return false
	case !b.precise:
		return true
	}
	n := float64(b.n)
	mean := b.sum / n
	variance := max(b.sumSq-n*mean*mean, 0) / (n - 1)
	return math.Sqrt(variance/n) <= cellPrecision*mean
}
