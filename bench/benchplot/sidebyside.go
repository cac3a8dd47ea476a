package main

import (
	"bytes"
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/lvskit/lvskit/bench/benchdata"
)

// sideBySide draws the keepalived side-by-side of the log at in as SVG
// into out: the reload times and the CPU per 1,000 probes, each bar
// labelled with its value (the reload's differ a hundredfold).
func sideBySide(in, out string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	s, err := benchdata.ReadSideBySide(f)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	img, err := drawSideBySide(s)
	if err != nil {
		return err
	}
	return writeFile(out, img)
}

var sideColors = map[string]color.Color{
	"keepalived": color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"run":        color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"apply":      color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

var sideNames = map[string]string{"keepalived": "keepalived 2.2.7", "run": "lvsctl run", "apply": "lvsctl apply"}

// bars is one panel: a bar per side, in order.
func bars(title, ylabel string, sides []string, value func(side string) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	var names []string
	for i, side := range sides {
		v := value(side)
		if v <= 0 {
			return nil, fmt.Errorf("%s: no value for %s", title, side)
		}
		b, err := plotter.NewBarChart(plotter.Values{v}, vg.Points(28))
		if err != nil {
			return nil, err
		}
		b.Color = sideColors[side]
		b.XMin = float64(i)
		p.Add(b)
		names = append(names, sideNames[side])
		label := fmt.Sprintf("%.3g", v)
		if v >= 1000 {
			label = fmt.Sprintf("%.0f", v) // 1392, not 1.39e+03
		}
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: []plotter.XY{{X: float64(i), Y: v}}, Labels: []string{label}})
		if err != nil {
			return nil, err
		}
		l.Offset = vg.Point{X: -vg.Points(8), Y: vg.Points(3)}
		p.Add(l)
	}
	p.NominalX(names...)
	p.Y.Min = 0
	p.Y.Max *= 1.15 // room for the labels
	return p, nil
}

func drawSideBySide(s benchdata.SideBySide) ([]byte, error) {
	reload, err := bars(fmt.Sprintf("Reload, %d real servers", s.RealServers), "seconds from SIGHUP to the change in the kernel",
		[]string{"keepalived", "run", "apply"}, func(k string) float64 { return s.ReloadS[k] })
	if err != nil {
		return nil, err
	}
	// The floor, the handshake alone, when the run measured it.
	cpuBars := []string{"keepalived", "run"}
	if _, ok := s.CPUPer1000ProbesMS["floor"]; ok {
		cpuBars = append(cpuBars, "floor")
	}
	cpu, err := bars(fmt.Sprintf("Checking, every %gs", s.Interval), "CPU ms per 1,000 TCP probes",
		cpuBars, func(k string) float64 { return s.CPUPer1000ProbesMS[k] })
	if err != nil {
		return nil, err
	}
	canvas := vgsvg.New(vg.Centimeter*22, vg.Centimeter*9)
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 8, PadTop: vg.Millimeter * 2,
		PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	plots := [][]*plot.Plot{{reload, cpu}}
	canvases := plot.Align(plots, tiles, dc)
	reload.Draw(canvases[0][0])
	cpu.Draw(canvases[0][1])
	var b bytes.Buffer
	if _, err := canvas.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
