package main

import (
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rampSamples are n samples a second apart in which every figure grows, the
// client's figures only if withClient.
func rampSamples(n int, withClient bool) []sample {
	var out []sample
	for i := range n {
		s := sample{at: time.Duration(i+1) * time.Second, server: procStats{heap: uint64(i+1) << 20, goroutines: 10 + i, files: 5 + i},
			journalBytes: int64(i+1) << 18, settled: 50 * i, kills: i / 10}
		if withClient {
			s.client = &workerSample{procStats: procStats{heap: uint64(i+2) << 19, goroutines: 20 + 2*i, files: 8 + i},
				pending: i % 32, commits: 10, p50: time.Duration(i+1) * 100 * time.Microsecond, p99: time.Duration(i+1) * time.Millisecond}
		}
		out = append(out, s)
	}
	return out
}

// drawChart writes samples' chart and decodes it.
func drawChart(t *testing.T, samples []sample) image.Image {
	t.Helper()
	path := filepath.Join(t.TempDir(), "soak.png")
	require.NoError(t, writeChart(path, samples))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	return img
}

// colorIn counts the pixels of exactly c in panel i's cell of img.
func colorIn(img image.Image, i int, c color.RGBA) int {
	b := img.Bounds()
	w, h := b.Dx()/chartCols, b.Dy()/chartRows
	x0, y0 := b.Min.X+(i%chartCols)*w, b.Min.Y+(i/chartCols)*h
	n := 0
	for y := y0; y < y0+h; y++ {
		for x := x0; x < x0+w; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) == c {
				n++
			}
		}
	}
	return n
}

// A line across a panel is hundreds of pixels of its color; a legend's sample
// of it is a few dozen. So each panel's cell holds each of its lines.
const linePixels = 300

func TestWriteChartDrawsEveryPanel(t *testing.T) {
	img := drawChart(t, rampSamples(60, true))
	require.Equal(t, image.Rect(0, 0, 1056, 1056), img.Bounds())
	for i, p := range soakPanels {
		for _, l := range p.lines {
			require.GreaterOrEqual(t, colorIn(img, i, l.color), linePixels, "panel %q, line %q", p.title, l.label)
		}
	}
	require.Less(t, colorIn(img, 0, otherColor), linePixels, "the heap panel has no journal line")

	// Without the worker's figures, its lines (and their legends) are not drawn.
	img = drawChart(t, rampSamples(60, false))
	require.Less(t, colorIn(img, 0, clientColor), linePixels/10, "no client line in the heap panel")
	require.GreaterOrEqual(t, colorIn(img, 0, serverColor), linePixels, "the servers' line still is")
}

// No samples at all (a soak interrupted at once) still makes a chart, of
// empty panels.
func TestWriteChartEmpty(t *testing.T) {
	img := drawChart(t, nil)
	for i, p := range soakPanels {
		for _, l := range p.lines {
			require.Zero(t, colorIn(img, i, l.color), "panel %q, line %q", p.title, l.label)
		}
	}
	require.Error(t, writeChart(filepath.Join(t.TempDir(), "no", "dir.png"), rampSamples(3, true)))
}
