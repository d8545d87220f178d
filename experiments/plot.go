package experiments

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Series is one line of a line plot.
type Series struct {
	Name   string
	X, Y   []float64
	Dashed bool // reference curves (theory, paper) are dashed
}

// Axes describes a plot's labels and scales.
type Axes struct {
	Title, X, Y string
	LogX, LogY  bool
	// LegendBottomRight moves the legend out of the way of rising curves.
	LegendBottomRight bool
	// YMax, when set, leaves head room above the data (for the legend).
	YMax float64
}

// LinePlot writes a PNG with one line (with points) per series.
func LinePlot(path string, ax Axes, series []Series) error {
	p := newPlot(ax)
	measured, reference := 0, 0
	for _, s := range series {
		pts := make(plotter.XYs, len(s.X))
		for k := range s.X {
			pts[k] = plotter.XY{X: s.X[k], Y: s.Y[k]}
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", s.Name, err)
		}
		if s.Dashed {
			// Reference curves: grey, each with its own dash pattern.
			line.Color = color.Gray{Y: 90}
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
		p.Legend.Add(s.Name, line, points)
	}
	return save(p, path)
}

// Histogram writes a PNG histogram of values.
func Histogram(path string, ax Axes, values []float64, bins int) error {
	p := newPlot(ax)
	h, err := plotter.NewHist(plotter.Values(values), bins)
	if err != nil {
		return fmt.Errorf("histogram: %w", err)
	}
	h.FillColor = color.RGBA{R: 70, G: 130, B: 180, A: 255}
	p.Add(h)
	return save(p, path)
}

// Bars writes a grouped bar chart: groups along X, one bar per series.
func Bars(path string, ax Axes, groups []string, series []Series) error {
	p := newPlot(ax)
	w := vg.Points(50 / float64(max(len(series), 1)))
	for i, s := range series {
		b, err := plotter.NewBarChart(plotter.Values(s.Y), w)
		if err != nil {
			return fmt.Errorf("bars %s: %w", s.Name, err)
		}
		b.Color = plotutil.Color(i)
		b.Offset = w * vg.Length(float64(i)-float64(len(series)-1)/2)
		p.Add(b)
		p.Legend.Add(s.Name, b)
	}
	p.NominalX(groups...)
	return save(p, path)
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
	p.Legend.Top, p.Legend.Left = !ax.LegendBottomRight, !ax.LegendBottomRight
	if ax.YMax > 0 {
		p.Y.Max = ax.YMax
	}
	p.Add(plotter.NewGrid())
	return p
}

func save(p *plot.Plot, path string) error {
	if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, path); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}
