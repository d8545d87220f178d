package ringsim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ringside/ringside/experiments"
	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/sim"
)

// maxRingSize bounds n in a CSV the report reads (H_n is a loop over n):
// far beyond any ring the simulator runs.
const maxRingSize = 1 << 24

// Harmonic is H_n = 1 + 1/2 + … + 1/n.
func Harmonic(n int) float64 {
	h := 0.0
	for k := 1; k <= n; k++ {
		h += 1 / float64(k)
	}
	return h
}

// theory returns the closed-form expectation of election messages and its
// name, for the all-initiator case on each order and the single-initiator mean.
func theory(n int, order, init string) (float64, string) {
	fn := float64(n)
	switch {
	case init == InitOne:
		return (3*fn - 1) / 2, "(3n−1)/2"
	case order == sim.OrderSorted:
		return 2*fn - 1, "best 2n−1"
	case order == sim.OrderReverse:
		return fn * (fn + 1) / 2, "worst n(n+1)/2"
	default:
		return fn * Harmonic(n), "n·H_n"
	}
}

// exactForm is the closed form of election messages where one exists:
// Chang–Roberts' by order and initiators, LeLann's n².
func exactForm(alg string, n int, order, init string) (float64, string, bool) {
	switch alg {
	case ring.ChangRoberts:
		v, f := theory(n, order, init)
		return v, f, true
	case "lelann":
		return float64(n) * float64(n), "n²", n > 1
	}
	return 0, "", false
}

// plotFormula spells the floor and ceiling brackets the plot font lacks.
var plotFormula = strings.NewReplacer("⌊", "floor(", "⌋", ")", "⌈", "ceil(", "⌉", ")")

// figureOrder is the ring order the side-by-side figures show: random, the
// average case, when the CSV has it.
func figureOrder(t *experiments.Table) string {
	first := sim.OrderRandom
	for i := range t.Rows {
		o := t.Str(i, "order")
		if o == sim.OrderRandom {
			return o
		}
		if i == 0 {
			first = o
		}
	}
	return first
}

func (m *Messages) Report(in *experiments.ReportInput) (string, error) {
	t := in.Table
	var rows [][]string
	var msgs, times, cr experiments.Lines
	shown := figureOrder(t)
	nonMax, mismatch, challenges, over := 0, 0, 0, map[string]int{}
	var acks, hops, resent float64
	for _, g := range t.GroupBy("algorithm", "initiators", "order", "n") {
		name, init, order := g.Key[0], g.Key[1], g.Key[2]
		alg, err := ring.Lookup(name)
		if err != nil {
			return "", fmt.Errorf("column algorithm: %w", err)
		}
		n, err := strconv.Atoi(g.Key[3])
		if err != nil || n < 1 || n > maxRingSize {
			return "", fmt.Errorf("column n: %q is not a ring size (1 to %d)", g.Key[3], maxRingSize)
		}
		counts := t.Floats(g.Rows, "election_msgs")
		el := experiments.Summarize(counts)
		ed := experiments.Summarize(t.Floats(g.Rows, "elected_msgs"))
		ms := experiments.Summarize(t.Floats(g.Rows, "election_virtual_ms"))
		bound := float64(alg.Bound(n))
		for _, c := range counts {
			if c > bound {
				over[name]++
			}
		}
		nonMax += len(g.Rows) - t.Count(g.Rows, "leader_is_max", "true")
		for _, c := range t.Floats(g.Rows, "challenges") {
			challenges += int(c)
		}
		for _, i := range g.Rows {
			acks += t.Float(i, "hop_acks")
			hops += t.Float(i, "election_msgs") + t.Float(i, "elected_msgs")
			resent += t.Float(i, "retransmissions")
		}
		exact, delta := "—", "—"
		want, formula, ok := exactForm(name, n, order, init)
		if ok {
			exact = experiments.Num(want, 2) + " (" + formula + ")"
			delta = experiments.Num(100*(el.Mean-want)/want, 2) + "%"
		}
		if name == ring.ChangRoberts && init == InitOne {
			for _, i := range g.Rows {
				if t.Float(i, "election_msgs") != float64(n)+t.Float(i, "max_distance") {
					mismatch++
				}
			}
		}
		rows = append(rows, []string{name, init, order, strconv.Itoa(n), strconv.Itoa(el.N),
			experiments.Num(el.Mean, 2), experiments.Num(el.Std, 2), experiments.Num(el.Min, 0), experiments.Num(el.Max, 0),
			experiments.Num(bound, 0), experiments.Num(100*el.Max/bound, 1) + "%", exact, delta,
			experiments.Num(ed.Mean, 2) + " / " + strconv.Itoa(n), experiments.Num(ms.P50, 2)})

		y, lo, hi := el.MeanSpread()
		// A ring of one elects without a message, at once: nothing for
		// the log axes (the table has it).
		if init == InitAll && order == shown && y > 0 && ms.Mean > 0 {
			msgs.Of(name).Point(float64(n), y, max(lo, y/1e3), hi)
			if b := msgs.Of("bound " + name + ": " + plotFormula.Replace(alg.BoundText)); !slices.Contains(b.X, float64(n)) {
				b.Dashed, b.Of = true, name
				b.X, b.Y = append(b.X, float64(n)), append(b.Y, bound)
			}
			tm, tlo, thi := ms.MeanSpread()
			times.Of(name).Point(float64(n), tm, max(tlo, tm/1e3), thi)
		}
		if name != ring.ChangRoberts {
			continue
		}
		who := "all initiate"
		if init == InitOne {
			who = "one initiator"
		}
		if y <= 0 {
			continue
		}
		cr.Of(who+", "+order+" ring").Point(float64(n), y, max(lo, y/1e3), hi)
		if th := cr.Of("theory " + formula); !slices.Contains(th.X, float64(n)) {
			th.Dashed = true
			th.X, th.Y = append(th.X, float64(n)), append(th.Y, want)
		}
	}
	out := experiments.MarkdownTable([]string{"algorithm", "initiators", "order", "n", "reps", "election msgs mean", "std", "min", "max",
		"worst-case bound", "max / bound", "exact form", "Δ vs exact", "elected msgs / n", "p50 virtual ms"}, rows)
	out += "\n"
	figs := []struct {
		name, caption string
		axes          experiments.Axes
		lines         []experiments.Series
	}{
		{"messages", "election messages vs n, every algorithm, bounds dashed",
			experiments.Axes{Title: "Election messages, all initiate, " + shown + " ring", X: "ring size n", Y: "election messages (mean ± std)", LogX: true, LogY: true}, msgs.List},
		{"time", "virtual time to elect vs n",
			experiments.Axes{Title: "Time to elect, all initiate, " + shown + " ring (1–3 ms per hop)", X: "ring size n", Y: "virtual ms (mean ± std)", LogX: true, LogY: true}, times.List},
		{"chang-roberts", "Chang–Roberts beside its closed forms",
			experiments.Axes{Title: "Chang–Roberts election messages", X: "ring size n", Y: "election messages (mean ± std)", LogX: true, LogY: true}, cr.List},
	}
	for _, f := range figs {
		if len(f.lines) == 0 {
			continue
		}
		fig, err := in.Figure(f.name, f.caption, experiments.Line(f.axes, f.lines))
		if err != nil {
			return "", err
		}
		out += "\n" + fig + "\n"
	}
	overText := "none"
	if len(over) > 0 {
		overText = fmt.Sprint(over)
	}
	out += fmt.Sprintf("\nLeader was the max UID in every run: **%v** (%d runs where it was not). "+
		"Runs above their algorithm's worst-case bound: **%s**. "+
		"Chang–Roberts single-initiator runs that miss n + d exactly (d = hops from the initiator to the max UID): **%d**. "+
		"The announcement adds n − 1 or n messages (elected msgs) and Chang–Roberts' end broadcast n − 1. "+
		"Elections beyond each algorithm's own (challenges of a smaller leader, which is what makes elections settle under loss — see ring-chaos): **%d** "+
		"over all runs, so the counts above are the algorithms' alone.\n\n", nonMax == 0, nonMax, overText, mismatch, challenges)
	if hops > 0 {
		out += fmt.Sprintf("Per-hop acknowledgement (ack timeout %s, counted apart from the counts above): **%.0f acknowledgements for %.0f election and elected messages** "+
			"(%.2f each: every hop is acknowledged, a retransmission's too) and **%.0f retransmissions** — the price of settling under loss, "+
			"which these loss-free runs do not need (see ring-chaos).\n\n", in.Meta.Params["ack-timeout"], acks, hops, acks/hops, resent)
	}
	out += "Exact forms (DESIGN §3.1): Chang–Roberts with all initiators — best case 2n−1 on the consistent-hash (sorted) ring, " +
		"worst n(n+1)/2 on the reversed ring, n·H_n on average over random orders; one initiator — n + d, mean (3n−1)/2 over random starters, " +
		"whatever the order; LeLann — n² always. The bounds are each algorithm's published worst case (README, election algorithms). " +
		"A cell stops early (reps column) once it has sent reps × " + in.Meta.Params["max-messages"] + " election messages, after at least 2 repetitions; " +
		"one with an exact form only once its mean is known to 0.5 % (standard error).\n"
	return out, nil
}
