package experiments

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// Task is one repetition of one cell of an experiment's grid (a cell is a
// combination of parameters: n, order, algorithm…).
type Task struct {
	Cell, Rep int
	// Seed is the task's own seed, the one rule every experiment follows:
	// SubSeed(master, seedCell·reps + rep), where seedCell is the cell, or
	// its group when cells share seeds (Grid.SameSeed). Every random
	// choice of the task flows from it, and its rows carry it in a seed
	// column, so a repetition can be rerun on its own.
	Seed uint64
}

// AllCPUs as Grid.Parallel runs as many tasks at once as there are CPUs.
const AllCPUs = -1

// Grid is the work of an experiment: Cells × env.Reps tasks, run in
// order cell by cell (task i is cell i / reps, repetition i % reps), or
// repetition by repetition when Interleave is set.
type Grid struct {
	Cells int
	// Interleave runs every cell once per repetition, in turn (task i is
	// cell i % cells, repetition i / cells): configurations measured on
	// this machine then meet its drift — a warming cache, a neighbour's
	// load — alike, instead of one configuration getting the quiet
	// minutes and the next the busy ones. Seeds are the same either way;
	// rows come out in run order.
	Interleave bool
	// SameSeed makes consecutive groups of that many cells share their
	// repetitions' seeds: common random numbers, so the pickers of one
	// load level see the same arrivals. 0 or 1: every cell its own.
	SameSeed int
	// Parallel is how many tasks run at once: 0 or 1 one at a time (for
	// experiments that time things on this machine), AllCPUs for
	// simulations, or a budget (elector processes on an API server).
	Parallel int
	// Cost, when set, is what a task of a cell takes of the Parallel
	// budget (its elector processes, say); a task that costs more than
	// the whole budget runs alone. Unset, every task costs 1.
	Cost func(cell int) int
	// Weight, when set, orders the dispatch: heavier cells' tasks start
	// first (ties in task order), so that the last tasks running beside
	// idle CPUs are short ones. Rows still come out in task order.
	Weight func(cell int) float64
}

// dispatchOrder is the order g's n tasks start in.
func (g Grid) dispatchOrder(n, reps int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if g.Weight != nil {
		w := make([]float64, n)
		for i := range w {
			w[i] = g.Weight(g.task(i, reps).Cell)
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(w[b], w[a]) })
	}
	return order
}

// task is the i-th task of g to run.
func (g Grid) task(i, reps int) Task {
	if g.Interleave {
		return Task{Cell: i % g.Cells, Rep: i / g.Cells}
	}
	return Task{Cell: i / reps, Rep: i % reps}
}

// Seed is the seed of repetition rep of cell in g under master.
func (g Grid) Seed(master uint64, reps, cell, rep int) uint64 {
	return SubSeed(master, (cell/max(g.SameSeed, 1))*reps+rep)
}

// RunGrid runs every task of g and emits each task's rows in task order,
// whatever the parallelism, so the CSV does not depend on scheduling. The
// first error cancels the rest and names its task.
func RunGrid[R any](ctx context.Context, env *Env, g Grid, task func(ctx context.Context, t Task) ([]R, error)) error {
	n := g.Cells * env.Reps
	env.Progress.SetTotal(n)
	units := g.Parallel
	if units == AllCPUs {
		units = runtime.GOMAXPROCS(0)
	}
	units = max(units, 1)
	workers := min(units, max(n, 1))
	// Only the feeder below acquires, in task order, so a costly task
	// waits for the units the running ones give back.
	budget := semaphore.NewWeighted(int64(units))
	cost := func(i int) int64 {
		if g.Cost == nil {
			return 1
		}
		return int64(min(max(g.Cost(g.task(i, env.Reps).Cell), 1), units))
	}
	type result struct {
		i    int
		rows []R
		err  error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	results := make(chan result, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t := g.task(i, env.Reps)
				t.Seed = g.Seed(env.Seed, env.Reps, t.Cell, t.Rep)
				rows, err := task(ctx, t)
				budget.Release(cost(i))
				results <- result{i, rows, err}
			}
		}()
	}
	go func() {
		defer close(next)
		for _, i := range g.dispatchOrder(n, env.Reps) {
			if budget.Acquire(ctx, cost(i)) != nil {
				return
			}
			select {
			case next <- i:
			case <-ctx.Done():
				budget.Release(cost(i))
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	pending := map[int][]R{}
	emitted := 0
	var firstErr error
	fail := func(err error) {
		if firstErr == nil {
			firstErr = err
			cancel()
		}
	}
	for r := range results {
		if firstErr != nil {
			continue // drain
		}
		if r.err != nil {
			t := g.task(r.i, env.Reps)
			fail(fmt.Errorf("cell %d rep %d: %w", t.Cell, t.Rep, r.err))
			continue
		}
		pending[r.i] = r.rows
		for rows, ok := pending[emitted]; ok; rows, ok = pending[emitted] {
			delete(pending, emitted)
			for _, row := range rows {
				if err := env.Emit(row); err != nil {
					fail(err)
				}
			}
			emitted++
			env.Progress.Add(1)
		}
	}
	if firstErr != nil {
		return firstErr
	}
	if emitted < n {
		return fmt.Errorf("interrupted after %d of %d tasks: %w", emitted, n, context.Cause(ctx))
	}
	return nil
}

// RunCells runs g with one task per cell that runs the cell's repetitions
// itself, in order, for experiments whose later repetitions depend on the
// earlier ones (ring-messages sizes a costly cell by its first). seed(rep)
// is the seed RunGrid would give the cell's repetition rep, so a cell's
// rows are RunGrid's rows for the repetitions it runs; rows come out cell
// by cell. Progress counts cells.
func RunCells[R any](ctx context.Context, env *Env, g Grid, task func(ctx context.Context, cell int, seed func(rep int) uint64) ([]R, error)) error {
	perCell := *env // the same sinks and progress; one task per cell
	perCell.Reps = 1
	g.Interleave = false
	return RunGrid(ctx, &perCell, g, func(ctx context.Context, t Task) ([]R, error) {
		return task(ctx, t.Cell, func(rep int) uint64 { return g.Seed(env.Seed, env.Reps, t.Cell, rep) })
	})
}

// Cells enumerates a grid's cells from its axes, the last axis varying
// fastest: Cells(2, 3) is (0,0) (0,1) (0,2) (1,0)… An experiment indexes
// its parameter lists with the coordinates of Task.Cell.
func Cells(sizes ...int) [][]int {
	total := 1
	for _, s := range sizes {
		total *= s
	}
	out := make([][]int, 0, total)
	for i := range total {
		c := make([]int, len(sizes))
		for k, r := len(sizes)-1, i; k >= 0; k-- {
			c[k] = r % sizes[k]
			r /= sizes[k]
		}
		out = append(out, c)
	}
	return out
}

// Ms is a duration in milliseconds, the unit of every _ms column that is
// not a time.Duration field.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
