package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// chartColumn is one subject's measured pushes, for the chart: push ->
// every cluster's Deployment spec carries it, and push -> every cluster's
// primary runs it, in seconds.
type chartColumn struct {
	name          string
	spec, primary []float64
}

// chartColumns are the subjects with measured pushes, in the report's
// order.
func chartColumns(r *results) []chartColumn {
	var out []chartColumn
	for _, s := range r.subjects {
		c := chartColumn{name: s.name}
		for _, m := range r.measures {
			if m.subject == s.name {
				c.spec = append(c.spec, m.allSpec.Seconds())
				c.primary = append(c.primary, m.allPrimary.Seconds())
			}
		}
		if len(c.spec) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// extent is the lowest and highest time of the columns (at least 1ms).
func extent(cols []chartColumn) (lo, hi float64) {
	lo, hi = math.Inf(1), 0.001
	for _, c := range cols {
		for _, v := range append(slices.Clone(c.spec), c.primary...) {
			lo, hi = min(lo, max(v, 0.001)), max(hi, v)
		}
	}
	return lo, hi
}

// writeChart draws every measured push's fleet-wide times per tool (a dot
// each, on a logarithmic axis: webhooks take seconds, polls minutes) as a
// PNG at path.
func writeChart(path string, r *results) error {
	cols := chartColumns(r)
	if len(cols) == 0 {
		return fmt.Errorf("drawing the chart: no measured push")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("push -> fleet-wide, %d clusters, one dot per push from its manifest PUT (below 1 ms: at 1 ms)", r.clusters)
	p.Y.Label.Text = "seconds (log)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	var names []string
	series := []struct {
		label  string
		offset float64
		of     func(chartColumn) []float64
		color  color.RGBA
		shape  draw.GlyphDrawer
	}{
		{"every cluster's Deployment spec carries it", -0.12, func(c chartColumn) []float64 { return c.spec },
			color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, draw.CircleGlyph{}},
		{"every cluster's primary runs it (Flagger's analysis included)", 0.12, func(c chartColumn) []float64 { return c.primary },
			color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, draw.PyramidGlyph{}},
	}
	for _, c := range cols {
		names = append(names, c.name)
	}
	for _, s := range series {
		var pts plotter.XYs
		for i, c := range cols {
			for _, v := range s.of(c) {
				pts = append(pts, plotter.XY{X: float64(i) + s.offset, Y: max(v, 0.001)})
			}
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return fmt.Errorf("drawing the chart: %w", err)
		}
		sc.GlyphStyle.Color, sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = s.color, s.shape, vg.Points(3)
		p.Add(sc)
		p.Legend.Add(s.label, sc)
	}
	p.Add(plotter.NewGrid())
	p.NominalX(names...)
	// Room at the sides for the dots' offsets and above the highest dot
	// for the legend.
	p.X.Min, p.X.Max = -0.5, float64(len(cols))-0.5
	lo, hi := extent(cols)
	p.Y.Min, p.Y.Max = lo/2, hi*8
	p.X.Tick.Label.Rotation = 0.35
	p.X.Tick.Label.XAlign = draw.XRight
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := p.Save(vg.Length(170+95*len(cols))*vg.Millimeter/2, 140*vg.Millimeter, path); err != nil {
		return fmt.Errorf("drawing the chart: %w", err)
	}
	return nil
}
