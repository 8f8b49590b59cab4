// This file draws the soak's samples (soak_sample.go) as one PNG: a panel per
// series, time on x, a line per process, every y axis from zero, so that
// growth or a leak shows at a glance. It uses gonum.org/v1/plot, which gives
// axes, ticks and legends that a hand-made renderer would have to copy.

package main

import (
	"fmt"
	"image"
	"image/color"
	stddraw "image/draw"
	"image/png"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// chartLine is one line of a panel: a CSV column, drawn in its color.
type chartLine struct {
	label, column string
	color         color.RGBA
}

// chartPanel is one panel of the chart.
type chartPanel struct {
	title string
	lines []chartLine
}

var (
	clientColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	serverColor = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	otherColor  = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	tailColor   = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
)

// chartRows and chartCols lay the panels out, in reading order.
const chartRows, chartCols = 4, 2

// soakPanels are the chart's panels.
var soakPanels = []chartPanel{
	{"heap in use (MiB)", []chartLine{{"client (worker)", "client_heap_mib", clientColor}, {"servers (chaos process)", "server_heap_mib", serverColor}}},
	{"goroutines", []chartLine{{"client (worker)", "client_goroutines", clientColor}, {"servers (chaos process)", "server_goroutines", serverColor}}},
	{"open files", []chartLine{{"client (worker)", "client_open_files", clientColor}, {"servers (chaos process)", "server_open_files", serverColor}}},
	{"journal file on disk (MiB)", []chartLine{{"bbolt journal", "journal_mib", otherColor}}},
	{"pending in the journal (in flight included)", []chartLine{{"client (worker)", "pending", clientColor}}},
	{"write-ahead commit (ms, over each interval)", []chartLine{{"p50", "commit_p50_ms", clientColor}, {"p99", "commit_p99_ms", tailColor}}},
	{"payments kept: all (ledger) and the key TTL's (idempotency store)", []chartLine{
		{"settled: in the ledger and registry", "settled", otherColor}, {"live keys in the store", "server_live_keys", serverColor}}},
	{"SIGKILLs of the worker", []chartLine{{"kills", "kills", serverColor}}},
}

// writeChart draws samples into a PNG file at path.
func writeChart(path string, samples []sample) error {
	const width, height = 11 * vg.Inch, 11 * vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(96))
	tiles := draw.Tiles{Rows: chartRows, Cols: chartCols, PadX: 6 * vg.Millimeter, PadY: 6 * vg.Millimeter,
		PadTop: 3 * vg.Millimeter, PadBottom: 3 * vg.Millimeter, PadLeft: 3 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	plots := make([][]*plot.Plot, chartRows)
	for r := range plots {
		plots[r] = make([]*plot.Plot, chartCols)
	}
	for i, panel := range soakPanels {
		p, err := panelPlot(panel, samples)
		if err != nil {
			return err
		}
		plots[i/chartCols][i%chartCols] = p
	}
	canvases := plot.Align(plots, tiles, draw.New(img))
	for r := range plots {
		for c, p := range plots[r] {
			if p != nil {
				p.Draw(canvases[r][c])
			}
		}
	}
	// A few dozen colors are enough for lines on white: a paletted PNG is a
	// third the size of the RGBA one, small enough to keep in the repository.
	rgba := img.Image()
	pal := image.NewPaletted(rgba.Bounds(), chartPalette())
	stddraw.Draw(pal, pal.Bounds(), rgba, image.Point{}, stddraw.Src)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(f, pal); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// chartPalette is 16 grays for text and grid, and each line color blended
// into white in four steps for the anti-aliased edges.
func chartPalette() color.Palette {
	var p color.Palette
	for g := range 16 {
		p = append(p, color.Gray{Y: uint8(g * 17)})
	}
	for _, c := range []color.RGBA{clientColor, serverColor, otherColor, tailColor} {
		for step := 1; step <= 4; step++ {
			mix := func(v uint8) uint8 { return uint8(255 - (255-int(v))*step/4) }
			p = append(p, color.RGBA{R: mix(c.R), G: mix(c.G), B: mix(c.B), A: 0xff})
		}
	}
	return p
}

// panelPlot is one panel's plot: its lines over minutes into the run, the y
// axis from zero.
func panelPlot(panel chartPanel, samples []sample) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = panel.title
	p.X.Label.Text = "minutes into the run"
	p.X.Min, p.Y.Min = 0, 0
	if len(samples) > 0 {
		p.X.Max = samples[len(samples)-1].at.Minutes() // the same x axis in every panel
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	for _, l := range panel.lines {
		col := columnByName(l.column)
		var xys plotter.XYs
		for _, s := range samples {
			if v, ok := col.value(s); ok {
				xys = append(xys, plotter.XY{X: s.at.Minutes(), Y: v})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("chart %q: %w", panel.title, err)
		}
		line.Color, line.Width = l.color, 1.5
		p.Add(line)
		p.Legend.Add(l.label, line)
	}
	// Headroom above the highest point keeps the legend off the lines' tops.
	p.Y.Max = max(p.Y.Max*1.25, 1)
	return p, nil
}
