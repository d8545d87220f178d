package experiments

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func pngWidth(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	return img.Bounds().Dx()
}

// Every figure is written as PNG and SVG; a legend takes a column of its
// own right of the data area instead of covering it.
func TestFiguresHaveSVGAndLegendBesideTheData(t *testing.T) {
	dir := t.TempDir()
	var lines Lines
	s := lines.Of("measured")
	s.Point(1, 10, 8, 13)
	s.Point(2, 20, 18, 25)
	ref := lines.Of("paper")
	ref.Dashed, ref.X, ref.Y = true, []float64{1, 2}, []float64{12, 22}
	with := filepath.Join(dir, "with.png")
	require.NoError(t, LinePlot(with, Axes{Title: "t"}, lines.List))
	without := filepath.Join(dir, "without.png")
	require.NoError(t, Histogram(without, Axes{Title: "t"}, []float64{1, 2, 2, 3}, 3))
	assert.Greater(t, pngWidth(t, with), pngWidth(t, without), "the legend column widens the figure")

	b := Series{Name: "bld", Y: []float64{1, 0.5}, Lo: []float64{0.5, 0.5}, Hi: []float64{1.5, 0.5}, Ref: []float64{2.2, math.NaN()}}
	bars := filepath.Join(dir, "bars.png")
	require.NoError(t, Bars(bars, Axes{Title: "imbalance"}, []string{"3 apps", "5 apps"}, []Series{b}))
	for _, p := range []string{with, without, bars} {
		svg, err := os.ReadFile(strings.TrimSuffix(p, ".png") + ".svg")
		require.NoError(t, err, "an SVG beside %s", p)
		assert.Contains(t, string(svg), "<svg")
	}
	svg, _ := os.ReadFile(filepath.Join(dir, "bars.svg"))
	assert.Contains(t, string(svg), ">paper<", "the paper's mark has a legend entry")
}

func TestSpreads(t *testing.T) {
	s := Summarize([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	y, lo, hi := s.MedianSpread()
	assert.Equal(t, []float64{s.P50, s.P10, s.P90}, []float64{y, lo, hi})
	y, lo, hi = s.MeanSpread()
	assert.Equal(t, 5.5, y)
	assert.InDelta(t, 5.5-s.Std, lo, 1e-12)
	assert.InDelta(t, 5.5+s.Std, hi, 1e-12)
	_, lo, hi = Summarize([]float64{0, 0, 0, 100}).MeanSpread()
	assert.Equal(t, 0.0, lo, "never below the smallest value")
	assert.LessOrEqual(t, hi, 100.0)
}

// A plot with nothing to draw is refused by name, on any axes: gonum
// would panic on an empty log axis and spin for ever on a linear one.
func TestLinePlotRefusesNothingToDraw(t *testing.T) {
	nan := math.NaN()
	for _, series := range [][]Series{nil, {{Name: "a"}}, {{Name: "a", X: []float64{1}, Y: []float64{nan}}}} {
		for _, ax := range []Axes{{Title: "lin"}, {Title: "log", LogY: true}} {
			err := LinePlot(filepath.Join(t.TempDir(), "p.png"), ax, series)
			assert.ErrorContains(t, err, "no point to draw", "%s %v", ax.Title, series)
		}
	}
}
