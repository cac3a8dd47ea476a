// Command benchplot turns the results of a lab benchmark run (package
// bench) into what docs/benchmarks.md shows: it reads the run's log (or a
// results file), writes the results as JSON, draws the log-log plot of
// time against table size per operation (ours, Debian's ipvsadm, the
// kernel floor) as SVG, and writes the Markdown tables of the numbers into
// the document beside the plot (between its benchplot markers), or prints
// them. make bench runs it; it is a development tool, not installed.
//
//	benchplot -in .cache/bench.log -json docs/benchmarks.json -plot docs/benchmarks.svg -doc docs/benchmarks.md
//
// With -keepalived it draws the side-by-side of lvsctl run and keepalived
// (bench's TestKeepalivedSideBySide) instead:
//
//	benchplot -keepalived .cache/bench-keepalived.log -plot docs/keepalived.svg
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/lvskit/lvskit/bench/benchdata"
)

func main() {
	var in logList
	flag.Var(&in, "in", "the benchmark run's log, or a results JSON file; again for more runs, whose tables replace the earlier runs' same tables")
	jsonOut := flag.String("json", "", "write the results as JSON to this file")
	plotOut := flag.String("plot", "", "write the plot to this file (.svg or .png)")
	layout := flag.String("layout", "spread", "the layout the plot shows")
	dests := flag.Int("dests", 10, "destinations per service of the tables the plot shows")
	docOut := flag.String("doc", "", "write the tables into this Markdown file, between its benchplot markers, instead of printing them")
	kaIn := flag.String("keepalived", "", "draw the keepalived side-by-side of this log (or JSON file) into -plot instead")
	flag.Parse()
	if *kaIn != "" && *plotOut != "" && len(in) == 0 && flag.NArg() == 0 {
		if err := sideBySide(*kaIn, *plotOut); err != nil {
			fmt.Fprintln(os.Stderr, "benchplot:", err)
			os.Exit(1)
		}
		return
	}
	if len(in) == 0 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: benchplot -in LOG [-in LOG]... [-json FILE] [-plot FILE.svg|FILE.png] [-doc FILE.md] [-layout spread] [-dests 10]\n       benchplot -keepalived LOG -plot FILE.svg")
		os.Exit(2)
	}
	if err := run(in, *jsonOut, *plotOut, *docOut, *layout, *dests); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

// logList is the -in flag's value: one or more logs.
type logList []string

func (l *logList) String() string     { return strings.Join(*l, ",") }
func (l *logList) Set(v string) error { *l = append(*l, v); return nil }

func run(in []string, jsonOut, plotOut, docOut, layout string, dests int) error {
	var r *benchdata.Results
	for _, path := range in {
		next, err := readResults(path)
		if err != nil {
			return err
		}
		if r == nil {
			r = next
		} else if err := r.Merge(next); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	// Every file is made before any is written, so a plot that cannot be
	// drawn or a document without markers leaves the others as they were.
	var tables bytes.Buffer
	r.Markdown(&tables)
	var js, img, doc []byte
	if jsonOut != "" {
		var b bytes.Buffer
		if err := r.WriteJSON(&b); err != nil {
			return err
		}
		js = b.Bytes()
	}
	if plotOut != "" {
		var err error
		if img, err = drawPanels(r, layout, dests, filepath.Ext(plotOut) == ".png"); err != nil {
			return err
		}
	}
	if docOut != "" {
		old, err := os.ReadFile(docOut)
		if err != nil {
			return err
		}
		if doc, err = withTables(old, tables.Bytes()); err != nil {
			return fmt.Errorf("%s: %w", docOut, err)
		}
	}
	for _, f := range []struct {
		path string
		data []byte
	}{{jsonOut, js}, {plotOut, img}, {docOut, doc}} {
		if f.data != nil {
			if err := writeFile(f.path, f.data); err != nil {
				return err
			}
		}
	}
	if docOut == "" {
		_, err := os.Stdout.Write(tables.Bytes())
		return err
	}
	return nil
}

// The markers around the part of a document that benchplot writes.
const (
	docBegin = "<!-- benchplot: begin. `make bench-plot` writes what follows, from docs/benchmarks.json; do not edit. -->"
	docEnd   = "<!-- benchplot: end -->"
)

// withTables returns doc with what lies between its markers replaced by
// tables. It refuses a document without exactly one pair of markers in
// order, which it could only guess at.
func withTables(doc, tables []byte) ([]byte, error) {
	b, e := bytes.Index(doc, []byte(docBegin)), bytes.Index(doc, []byte(docEnd))
	if b < 0 || e < 0 {
		return nil, fmt.Errorf("no benchplot markers (%q … %q)", docBegin, docEnd)
	}
	if e < b || bytes.Count(doc, []byte(docBegin)) > 1 || bytes.Count(doc, []byte(docEnd)) > 1 {
		return nil, errors.New("the benchplot markers are not one pair in order")
	}
	var out bytes.Buffer
	out.Write(doc[:b+len(docBegin)])
	out.WriteString("\n\n")
	out.Write(tables)
	out.Write(doc[e:])
	return out.Bytes(), nil
}

func readResults(path string) (*benchdata.Results, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := benchdata.Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// writeFile replaces path atomically: a temporary file beside it, synced,
// then renamed over it.
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// The three series of every panel.
var series = []struct {
	name  string
	color color.RGBA
	dash  []vg.Length
	runs  func(*benchdata.Case) []int64
}{
	{"ours", color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, nil, func(c *benchdata.Case) []int64 { return c.Ours }},
	{"Debian ipvsadm 1.31", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, nil, func(c *benchdata.Case) []int64 { return c.Reference }},
	{"floor (bare netlink)", color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}, []vg.Length{vg.Points(4), vg.Points(3)}, func(c *benchdata.Case) []int64 { return c.Floor }},
}

// drawPanels draws one log-log panel per operation: median time in
// milliseconds against the number of services, for the tables of one
// layout and number of destinations per service; SVG, or PNG if png.
func drawPanels(r *benchdata.Results, layout string, dests int, png bool) ([]byte, error) {
	var sizes []int
	for _, c := range r.Cases {
		if c.Layout == layout && c.Dests == dests && !slices.Contains(sizes, c.Services) {
			sizes = append(sizes, c.Services)
		}
	}
	slices.Sort(sizes)
	if len(sizes) == 0 {
		return nil, fmt.Errorf("no results for the %s layout with %d destinations per service", layout, dests)
	}
	ops := benchdata.Ops
	// One panel per operation and a last tile for the legend.
	legend := plot.New()
	legend.HideAxes()
	legend.Legend.Top = true
	legend.Legend.YOffs = -vg.Points(40)
	plots := [][]*plot.Plot{make([]*plot.Plot, len(ops)+1)}
	plots[0][len(ops)] = legend
	for i, op := range ops {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("ipvsadm %s", benchdata.Commands[op])
		p.X.Label.Text = fmt.Sprintf("services (×%d destinations)", dests)
		p.Y.Label.Text = "median time (ms)"
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = sizeTicks(sizes), plot.LogTicks{Prec: -1}
		for _, s := range series {
			var pts plotter.XYs
			for _, n := range sizes {
				c := r.Find(layout, n, dests, op)
				if c == nil {
					continue
				}
				if m := benchdata.Median(s.runs(c)); m > 0 {
					pts = append(pts, plotter.XY{X: float64(n), Y: float64(m) / 1e6})
				}
			}
			if len(pts) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return nil, err
			}
			line.Color, line.Dashes = s.color, s.dash
			points.Color, points.Shape = s.color, draw.CircleGlyph{}
			p.Add(line, points)
			if i == 0 {
				legend.Legend.Add(s.name, line, points)
			}
		}
		plots[0][i] = p
	}
	width, height := vg.Length(len(ops)+1)*2.4*vg.Inch, 3.2*vg.Inch
	var canvas interface {
		vg.CanvasSizer
		WriteTo(io.Writer) (int64, error)
	}
	if png {
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(96))}
	} else {
		canvas = vgsvg.New(width, height)
	}
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: 1, Cols: len(ops) + 1, PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2,
		PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for i, p := range plots[0] {
		p.Draw(canvases[0][i])
	}
	var b bytes.Buffer
	if _, err := canvas.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// sizeTicks labels the measured sizes (100, 1k, 10k, 50k).
func sizeTicks(sizes []int) plot.ConstantTicks {
	ticks := make(plot.ConstantTicks, len(sizes))
	for i, n := range sizes {
		label := fmt.Sprint(n)
		if n >= 1000 && n%1000 == 0 {
			label = fmt.Sprintf("%dk", n/1000)
		}
		ticks[i] = plot.Tick{Value: float64(n), Label: label}
	}
	return ticks
}
