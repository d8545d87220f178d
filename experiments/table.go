package experiments

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/stat"
)

// Table is a CSV read back for reporting.
type Table struct {
	Header []string
	Rows   [][]string
	col    map[string]int
	// missing is the first column asked for that the CSV does not have:
	// a misspelt name in a report is an error (Err), never empty values.
	missing string
}

// ReadTable parses a CSV with a header line.
func ReadTable(r io.Reader) (*Table, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("read csv: %w", err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("read csv: no header")
	}
	t := &Table{Header: recs[0], Rows: recs[1:], col: map[string]int{}}
	for i, h := range t.Header {
		t.col[h] = i
	}
	return t, nil
}

// Has reports whether the table has column name.
func (t *Table) Has(name string) bool { _, ok := t.col[name]; return ok }

// Str returns column name of row i; a column the table does not have
// reads as "" and makes Err fail.
func (t *Table) Str(i int, name string) string {
	c, ok := t.col[name]
	if !ok {
		if t.missing == "" {
			t.missing = name
		}
		return ""
	}
	return t.Rows[i][c]
}

// Err names the first column read that the table does not have.
func (t *Table) Err() error {
	if t.missing != "" {
		return fmt.Errorf("csv has no column %q (columns: %s)", t.missing, strings.Join(t.Header, ", "))
	}
	return nil
}

// Float returns column name of row i as a number (NaN when not one).
func (t *Table) Float(i int, name string) float64 {
	v, err := strconv.ParseFloat(t.Str(i, name), 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// Require returns an error naming the first missing column.
func (t *Table) Require(names ...string) error {
	for _, n := range names {
		if !t.Has(n) {
			return fmt.Errorf("csv has no column %q", n)
		}
	}
	return nil
}

// Group is the rows sharing the same values of some key columns.
type Group struct {
	Key  []string
	Rows []int
}

// GroupBy partitions row indices by the values of cols, groups in order of
// first appearance.
func (t *Table) GroupBy(cols ...string) []Group {
	var groups []Group
	at := map[string]int{}
	for i := range t.Rows {
		key := make([]string, len(cols))
		for k, c := range cols {
			key[k] = t.Str(i, c)
		}
		id := strings.Join(key, "\x00")
		g, ok := at[id]
		if !ok {
			g = len(groups)
			at[id] = g
			groups = append(groups, Group{Key: key})
		}
		groups[g].Rows = append(groups[g].Rows, i)
	}
	return groups
}

// Split partitions rows (a group's, say) by the value of one column, in
// order of first appearance: a group's repetitions, for instance.
func (t *Table) Split(rows []int, col string) [][]int {
	at := map[string]int{}
	var out [][]int
	for _, i := range rows {
		v := t.Str(i, col)
		k, ok := at[v]
		if !ok {
			k = len(out)
			at[v] = k
			out = append(out, nil)
		}
		out[k] = append(out[k], i)
	}
	return out
}

// Floats returns column name over rows, skipping values that are not numbers.
func (t *Table) Floats(rows []int, name string) []float64 {
	out := make([]float64, 0, len(rows))
	for _, i := range rows {
		if v := t.Float(i, name); !math.IsNaN(v) {
			out = append(out, v)
		}
	}
	return out
}

// Count returns how many of rows have column name equal to value.
func (t *Table) Count(rows []int, name, value string) int {
	n := 0
	for _, i := range rows {
		if t.Str(i, name) == value {
			n++
		}
	}
	return n
}

// Summary is the usual description of a sample.
type Summary struct {
	N                   int
	Mean, Std, Min, Max float64
	P10, P50, P90, P99  float64
	P999                float64
}

// Summarize describes xs (sample standard deviation, empirical quantiles).
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		nan := math.NaN()
		return Summary{Mean: nan, Std: nan, Min: nan, Max: nan, P10: nan, P50: nan, P90: nan, P99: nan, P999: nan}
	}
	sorted := slices.Clone(xs)
	sort.Float64s(sorted)
	s := Summary{N: len(xs), Min: sorted[0], Max: sorted[len(sorted)-1]}
	s.Mean, s.Std = stat.MeanStdDev(sorted, nil)
	if len(xs) == 1 {
		s.Std = 0
	}
	s.P10, s.P50, s.P90, s.P99 = Quantile(sorted, 0.1), Quantile(sorted, 0.5), Quantile(sorted, 0.9), Quantile(sorted, 0.99)
	s.P999 = Quantile(sorted, 0.999)
	return s
}

// Spread is the mean with the range over the sample when it has more
// than one value: "mean (min–max)".
func (s Summary) Spread(digits int) string {
	if s.N < 2 {
		return Num(s.Mean, digits)
	}
	return fmt.Sprintf("%s (%s–%s)", Num(s.Mean, digits), Num(s.Min, digits), Num(s.Max, digits))
}

// Overlap tells whether two samples' ranges overlap: two runs of one
// configuration must, or the spread understates the noise.
func Overlap(a, b Summary) bool { return a.N > 0 && b.N > 0 && a.Min <= b.Max && b.Min <= a.Max }

// Quantile is the empirical q-quantile of sorted.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	return stat.Quantile(q, stat.Empirical, sorted, nil)
}

// Num formats a number for a markdown table: up to digits decimals,
// trailing zeros trimmed.
func Num(v float64, digits int) string {
	if math.IsNaN(v) {
		return "–"
	}
	s := strconv.FormatFloat(v, 'f', digits, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// MarkdownTable renders a header and rows.
func MarkdownTable(header []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n|")
	for range header {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

// Verdict is how a report states whether a target was met: missed ones
// stand out in bold.
func Verdict(met bool) string {
	if met {
		return "met"
	}
	return "**missed**"
}

// Judge states whether a target was met over repetitions, one value each:
// "met" or "**missed**" only when every repetition agrees, otherwise
// "inconclusive" — and always with the spread it rests on. One repetition
// has no spread: it is inconclusive, however far from the target.
func Judge(xs []float64, ok func(float64) bool) string {
	vals := withoutNaN(xs)
	if len(vals) == 0 {
		return "–"
	}
	s := Summarize(vals)
	n := 0
	for _, x := range vals {
		if ok(x) {
			n++
		}
	}
	switch {
	case len(vals) == 1:
		return fmt.Sprintf("inconclusive (one repetition: %s; run more, or --profile paper)", Num(vals[0], 2))
	case n == len(vals):
		return fmt.Sprintf("met (all %d repetitions, %s–%s)", n, Num(s.Min, 2), Num(s.Max, 2))
	case n == 0:
		return fmt.Sprintf("**missed** (all %d repetitions, %s–%s)", len(vals), Num(s.Min, 2), Num(s.Max, 2))
	}
	return fmt.Sprintf("inconclusive (%d of %d repetitions, %s–%s)", n, len(vals), Num(s.Min, 2), Num(s.Max, 2))
}

// Ratios divides a by b element by element (repetition by repetition),
// as far as both go.
func Ratios(a, b []float64) []float64 {
	out := make([]float64, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] / b[i]
	}
	return out
}
