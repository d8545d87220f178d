package experiments

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series is one line of a line plot, or one colour of a bar chart.
type Series struct {
	Name   string
	X, Y   []float64
	Dashed bool // reference curves (theory, paper) are dashed
	// Of, on a reference curve, names the measured series it belongs to
	// (an algorithm's bound): it is drawn in that series' colour.
	Of string
	// Lo and Hi, when set (one per point), are the spread over
	// repetitions drawn as error bars: a percentile range around a
	// median, or ± one standard deviation around a mean.
	Lo, Hi []float64
	// Ref, when set (one per bar, NaN for none), marks a paper's value on
	// a bar chart.
	Ref []float64
}

// Lines collects series by name, in order of first use (so colours follow
// the CSV, not map order).
type Lines struct{ List []Series }

// Of returns the series named name, adding it if new.
func (l *Lines) Of(name string) *Series {
	for i := range l.List {
		if l.List[i].Name == name {
			return &l.List[i]
		}
	}
	l.List = append(l.List, Series{Name: name})
	return &l.List[len(l.List)-1]
}

// Point appends a point with its spread.
func (s *Series) Point(x, y, lo, hi float64) {
	s.X, s.Y = append(s.X, x), append(s.Y, y)
	s.Lo, s.Hi = append(s.Lo, lo), append(s.Hi, hi)
}

// MedianSpread is y = the median with error bars from the 10th to the 90th
// percentile; MeanSpread is the mean ± one standard deviation.
func (s Summary) MedianSpread() (y, lo, hi float64) { return s.P50, s.P10, s.P90 }
func (s Summary) MeanSpread() (y, lo, hi float64) {
	return s.Mean, math.Max(s.Mean-s.Std, s.Min), math.Min(s.Mean+s.Std, s.Max)
}

// Axes describes a plot's labels and scales.
type Axes struct {
	Title, X, Y string
	LogX, LogY  bool
	// YMax, when set, fixes the top of the Y axis.
	YMax float64
}

// check refuses a point the axes cannot draw: infinite, or not positive
// on a log axis (gonum panics on those). NaN stays: a gap.
func (ax Axes) check(series string, k int, x, y float64) error {
	for _, v := range []struct {
		name string
		v    float64
		log  bool
	}{{ax.X, x, ax.LogX}, {ax.Y, y, ax.LogY}} {
		if math.IsInf(v.v, 0) || v.log && v.v <= 0 {
			return fmt.Errorf("plot %q, series %q, point %d: %s = %v cannot be drawn (a log axis needs positive values)", ax.Title, series, k, v.name, v.v)
		}
	}
	return nil
}

// LinePlot writes a line (with points, and error bars where a series has
// a spread) per series.
func LinePlot(path string, ax Axes, series []Series) error {
	points := 0
	for _, s := range series {
		for k := range s.X {
			if !math.IsNaN(s.X[k]) && !math.IsNaN(s.Y[k]) {
				points++
			}
		}
	}
	if points == 0 {
		// gonum cannot range an axis with no value: a log one panics, a
		// linear one spins for ever choosing ticks for a NaN range.
		return fmt.Errorf("plot %q: no point to draw", ax.Title)
	}
	p := newPlot(ax)
	measured, reference := 0, 0
	colours := map[string]color.Color{}
	for _, s := range series {
		if !s.Dashed {
			colours[s.Name] = plotutil.Color(len(colours))
		}
	}
	for _, s := range series {
		pts := make(plotter.XYs, len(s.X))
		for k := range s.X {
			if err := ax.check(s.Name, k, s.X[k], s.Y[k]); err != nil {
				return err
			}
			pts[k] = plotter.XY{X: s.X[k], Y: s.Y[k]}
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", s.Name, err)
		}
		if s.Dashed {
			// Reference curves: grey, each with its own dash pattern.
			line.Color = color.Gray{Y: 90}
			if c, ok := colours[s.Of]; ok {
				line.Color = c
			}
			line.Dashes = plotutil.Dashes(reference + 1)
			points.Radius = 0
			reference++
		} else {
			c := plotutil.Color(measured)
			line.Color, points.Color = c, c
			points.Shape = plotutil.Shape(measured)
			measured++
		}
		p.Add(line, points)
		if len(s.Lo) == len(s.X) && len(s.Hi) == len(s.X) && spread(s.Lo, s.Hi, s.Y) {
			eb, err := plotter.NewYErrorBars(yErrors{pts, s.Lo, s.Hi})
			if err != nil {
				return fmt.Errorf("plot %s spread: %w", s.Name, err)
			}
			eb.Color = line.Color
			p.Add(eb)
		}
		p.Legend.Add(s.Name, line, points)
	}
	return save(p, path)
}

// spread reports whether the error bars would show anything.
func spread(lo, hi, y []float64) bool {
	for i := range y {
		if lo[i] < y[i] || hi[i] > y[i] {
			return true
		}
	}
	return false
}

type yErrors struct {
	plotter.XYs
	lo, hi []float64
}

func (e yErrors) YError(i int) (float64, float64) {
	return e.XYs[i].Y - e.lo[i], e.hi[i] - e.XYs[i].Y
}

// Histogram writes a histogram of values; values that are not finite
// (a hand-edited CSV's) are left out — gonum's binning never ends on NaN.
func Histogram(path string, ax Axes, values []float64, bins int) error {
	finite := slices.DeleteFunc(slices.Clone(values), func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) })
	if len(finite) == 0 {
		return fmt.Errorf("histogram %q: no finite value to draw (of %d)", ax.Title, len(values))
	}
	p := newPlot(ax)
	h, err := plotter.NewHist(plotter.Values(finite), bins)
	if err != nil {
		return fmt.Errorf("histogram: %w", err)
	}
	h.FillColor = color.RGBA{R: 70, G: 130, B: 180, A: 255}
	p.Add(h)
	return save(p, path)
}

// Bars writes a grouped bar chart: groups along X, one bar per series,
// with the series' spread as whiskers and its paper values as marks.
func Bars(path string, ax Axes, groups []string, series []Series) error {
	p := newPlot(ax)
	w := vg.Points(50 / float64(max(len(series), 1)))
	refs := false
	for i, s := range series {
		b, err := plotter.NewBarChart(plotter.Values(s.Y), w)
		if err != nil {
			return fmt.Errorf("bars %s: %w", s.Name, err)
		}
		b.Color = plotutil.Color(i)
		b.Offset = w * vg.Length(float64(i)-float64(len(series)-1)/2)
		p.Add(b)
		p.Legend.Add(s.Name, b)
		m := &marks{offset: b.Offset, width: w}
		if len(s.Lo) == len(s.Y) && len(s.Hi) == len(s.Y) && spread(s.Lo, s.Hi, s.Y) {
			m.lo, m.hi = s.Lo, s.Hi
		}
		if len(s.Ref) == len(s.Y) {
			m.ref = s.Ref
			refs = true
		}
		p.Add(m)
	}
	if refs {
		p.Legend.Add("paper", refMark{})
	}
	p.NominalX(groups...)
	return save(p, path)
}

// marks draws whiskers (lo–hi) and reference marks over one series' bars.
type marks struct {
	lo, hi, ref []float64
	offset      vg.Length
	width       vg.Length
}

var (
	whiskerStyle = draw.LineStyle{Color: color.Gray{Y: 40}, Width: vg.Points(0.8)}
	// A paper's value: a thick line across the whole bar width.
	refStyle = draw.LineStyle{Color: color.Black, Width: vg.Points(2)}
)

func (m *marks) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i := range m.lo {
		x := trX(float64(i)) + m.offset
		lo, hi := trY(m.lo[i]), trY(m.hi[i])
		c.StrokeLine2(whiskerStyle, x, lo, x, hi)
		c.StrokeLine2(whiskerStyle, x-m.width/4, lo, x+m.width/4, lo)
		c.StrokeLine2(whiskerStyle, x-m.width/4, hi, x+m.width/4, hi)
	}
	for i, r := range m.ref {
		if !math.IsNaN(r) {
			x, y := trX(float64(i))+m.offset, trY(r)
			c.StrokeLine2(refStyle, x-m.width/2-vg.Points(2), y, x+m.width/2+vg.Points(2), y)
		}
	}
}

// DataRange keeps whiskers and marks inside the axes.
func (m *marks) DataRange() (xmin, xmax, ymin, ymax float64) {
	ymin, ymax = 0, 0
	for _, v := range [][]float64{m.lo, m.hi, m.ref} {
		for _, y := range v {
			if !math.IsNaN(y) {
				ymin, ymax = math.Min(ymin, y), math.Max(ymax, y)
			}
		}
	}
	n := max(len(m.lo), len(m.ref))
	return 0, float64(max(n-1, 0)), ymin, ymax
}

type refMark struct{}

func (refMark) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(refStyle, c.Min.X, y, c.Max.X, y)
}

// widen gives an axis whose data span no range (one value, or values so
// large that float64 cannot tell them apart) a range to draw: gonum
// panics on an empty one.
func widen(a *plot.Axis) {
	if a.Max > a.Min {
		return
	}
	pad := math.Max(1, math.Abs(a.Min)/10)
	if _, log := a.Scale.(plot.LogScale); log {
		a.Min, a.Max = a.Min/2, a.Max*2
		return
	}
	a.Min, a.Max = a.Min-pad, a.Max+pad
}

func newPlot(ax Axes) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = ax.Title, ax.X, ax.Y
	if ax.LogX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
	}
	if ax.LogY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
	}
	if ax.YMax > 0 {
		p.Y.Max = ax.YMax
	}
	p.Add(plotter.NewGrid())
	return p
}

// Formats every figure is written in: PNG for the report, SVG beside it
// for papers (vector, scales without blur).
var figureFormats = []string{"png", "svg"}

// save writes p as path (a .png) and the same figure in the other
// formats beside it. The legend goes in a column right of the data area,
// never over the data.
func save(p *plot.Plot, path string) error {
	widen(&p.X)
	widen(&p.Y)
	legend := p.Legend
	legend.Top, legend.Left = true, true
	p.Legend = plot.NewLegend() // drawn outside, below
	const w, h = 16 * vg.Centimeter, 10 * vg.Centimeter
	base := strings.TrimSuffix(path, ".png")
	for _, format := range figureFormats {
		if err := saveAs(p, &legend, w, h, base+"."+format, format); err != nil {
			return err
		}
	}
	return nil
}

func saveAs(p *plot.Plot, legend *plot.Legend, w, h vg.Length, path, format string) error {
	// Size the legend column first, on a throwaway canvas of the format.
	probe, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	lw := vg.Length(0)
	if r := legend.Rectangle(draw.New(probe)); r.Max.X > r.Min.X {
		lw = r.Max.X - r.Min.X + vg.Points(12)
	}
	c, err := draw.NewFormattedCanvas(w+lw, h, format)
	if err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	dc := draw.New(c)
	p.Draw(draw.Crop(dc, 0, -lw, 0, 0))
	if lw > 0 {
		legend.Draw(draw.Crop(dc, w+vg.Points(6), 0, 0, -vg.Points(24)))
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return WriteFile(path, buf.Bytes())
}
