// Package benchdata holds the results of the lab benchmark (package bench).
//
// It holds what one run measured, how it is written to and read back from
// the run's log, and the tables docs/benchmarks.md shows (times, multiples
// of the kernel floor, growth from one size to the next). The lab test
// writes the results; the development tool bench/benchplot reads them, draws
// the plot and prints the tables.
package benchdata

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
)

// The operations measured, in the order tables show them.
var Ops = []string{"restore", "list", "save", "zero", "flush"}

// Commands names the ipvsadm command line of each operation, and
// lvsctl's of apply (which only the growth pairs measure).
var Commands = map[string]string{
	"restore": "-R", "list": "-Ln", "save": "-Sn", "zero": "-Z", "flush": "-C", "apply": "lvsctl apply",
}

// Case is one operation on one table, with every run's wall time in
// nanoseconds for our ipvsadm, Debian's and the floor (the bare netlink
// requests, see package bench).
type Case struct {
	Layout    string  `json:"layout"`
	Services  int     `json:"services"`
	Dests     int     `json:"dests"`
	Op        string  `json:"op"`
	Ours      []int64 `json:"ours"`
	Reference []int64 `json:"reference"`
	Floor     []int64 `json:"floor"`
	// OwnFloor is the floor of our method where it asks the kernel
	// differently from the netlink floor: listing and saving read IPv4
	// services' destinations with getsockopt (see ipvs.Conn).
	OwnFloor []int64 `json:"own_floor,omitempty"`
}

// Memory is a peak resident set size in bytes (VmHWM at exit).
type Memory struct {
	Name      string `json:"name"`
	Ours      int64  `json:"ours"`
	Reference int64  `json:"reference"`
}

// Pair is one side's operation on a layout's small and large table as
// TestGrowth (package bench) measures it: both sizes back to back in each
// round, so that a pair mostly shares one phase of the VM's speed. Runs
// are wall times and probes the speed probe around each run (the mean of
// one before and one after), in nanoseconds, round by round.
type Pair struct {
	Layout      string  `json:"layout"`
	Dests       int     `json:"dests"`
	Small       int     `json:"small"` // services
	Large       int     `json:"large"`
	Side        string  `json:"side"` // "ours" or "floor"
	Op          string  `json:"op"`
	SmallRuns   []int64 `json:"small_runs"`
	LargeRuns   []int64 `json:"large_runs"`
	SmallProbes []int64 `json:"small_probes"`
	LargeProbes []int64 `json:"large_probes"`
}

// Results is one benchmark run (or several merged).
type Results struct {
	Mode    string   `json:"mode"` // "full" or "smoke"
	Startup *Case    `json:"startup,omitempty"`
	Cases   []Case   `json:"cases"`
	Memory  []Memory `json:"memory"`
	Growth  []Pair   `json:"growth,omitempty"`
}

// Median returns the median of runs (the upper one of an even count).
func Median(runs []int64) int64 {
	if len(runs) == 0 {
		return 0
	}
	s := slices.Clone(runs)
	slices.Sort(s)
	return s[len(s)/2]
}

// Markers frame the results in a run's log, one JSON line between them.
const (
	beginMarker = "BENCH-RESULTS-BEGIN"
	endMarker   = "BENCH-RESULTS-END"
)

// Write writes r to a log between the markers.
func (r *Results) Write(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n%s\n%s\n", beginMarker, b, endMarker)
	return err
}

// Read reads the results written into a log, every block merged in the
// order written (a test run's log holds one block per test), or a bare
// JSON document.
func Read(rd io.Reader) (*Results, error) {
	data, err := io.ReadAll(rd)
	if err != nil {
		return nil, err
	}
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		var r Results
		return &r, json.Unmarshal(trimmed, &r)
	}
	var r *Results
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != beginMarker || !sc.Scan() {
			continue
		}
		var next Results
		if err := json.Unmarshal(bytes.TrimSpace(sc.Bytes()), &next); err != nil {
			return nil, err
		}
		if r == nil {
			r = &next
		} else if err := r.Merge(&next); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if r == nil {
		return nil, errors.New("no benchmark results in the log")
	}
	return r, nil
}

// Merge adds the results of a later run (make bench-plot with several
// logs, or on top of docs/benchmarks.json): a case, memory figure or
// growth pair of o replaces r's of the same table and operation (or
// name), so each one's runs stay those of one boot; the others are
// appended. o's start-up replaces r's if it has one. Results of another
// mode (a smoke run onto full-size results) are refused, and r is left
// as it was.
func (r *Results) Merge(o *Results) error {
	if r.Mode != o.Mode {
		return fmt.Errorf("results of a %s run cannot be merged into those of a %s run", o.Mode, r.Mode)
	}
	for _, c := range o.Cases {
		if old := r.Find(c.Layout, c.Services, c.Dests, c.Op); old != nil {
			*old = c
		} else {
			r.Cases = append(r.Cases, c)
		}
	}
	for _, m := range o.Memory {
		r.Memory = replaceOrAppend(r.Memory, m, func(x Memory) bool { return x.Name == m.Name })
	}
	for _, p := range o.Growth {
		r.Growth = replaceOrAppend(r.Growth, p, func(x Pair) bool {
			return x.Layout == p.Layout && x.Dests == p.Dests && x.Small == p.Small && x.Large == p.Large && x.Side == p.Side && x.Op == p.Op
		})
	}
	if o.Startup != nil {
		r.Startup = o.Startup
	}
	return nil
}

// replaceOrAppend puts v in place of the first element of s that is the
// same (same reports it), or after the last if none is.
func replaceOrAppend[T any](s []T, v T, same func(T) bool) []T {
	if i := slices.IndexFunc(s, same); i >= 0 {
		s[i] = v
		return s
	}
	return append(s, v)
}

// Find returns the case of an operation on a table, or nil.
func (r *Results) Find(layout string, services, dests int, op string) *Case {
	for i := range r.Cases {
		c := &r.Cases[i]
		if c.Layout == layout && c.Services == services && c.Dests == dests && c.Op == op {
			return c
		}
	}
	return nil
}

// Thousands writes n with thousands separators.
func Thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func ms(ns int64) string {
	d := time.Duration(ns)
	switch {
	case ns <= 0:
		return "—"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(ns)/1e6)
	default:
		return fmt.Sprintf("%.0f ms", float64(ns)/1e6)
	}
}

func ratio(a, b int64) string {
	if a <= 0 || b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", float64(a)/float64(b))
}

// Markdown writes the result tables, each under a heading of level 3:
// start-up, times and multiples of the floor per table and operation,
// growth from each size to the next of a layout, growth in pairs, and peak
// memory.
func (r *Results) Markdown(w io.Writer) {
	const heading = "###"
	if s := r.Startup; s != nil {
		fmt.Fprintf(w, "%s Start-up\n\n", heading)
		fmt.Fprintf(w, "`-Ln` of an empty table: reference %s, ours %s (%s the reference).\n\n",
			ms(Median(s.Reference)), ms(Median(s.Ours)), ratio(Median(s.Ours), Median(s.Reference)))
	}
	if len(r.Cases) > 0 {
		fmt.Fprintf(w, "%s Each table\n\n", heading)
		r.casesMarkdown(w)
	}
	if g := r.growth(); len(g) > 0 {
		fmt.Fprintf(w, "%s Growth from one table to the next\n\n", heading)
		fmt.Fprintln(w, "The growth of the medians above, whose tables were measured minutes or hours apart; linear growth equals the growth of the table (the column \"services\").")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| layout | sizes | services | op | floor | ours | reference |")
		fmt.Fprintln(w, "|---|---|--:|---|--:|--:|--:|")
		for _, l := range g {
			fmt.Fprintln(w, l)
		}
		fmt.Fprintln(w)
	}
	if len(r.Growth) > 0 {
		fmt.Fprintf(w, "%s The growth pairs\n\n", heading)
		r.pairsMarkdown(w)
	}
	if len(r.Memory) > 0 {
		fmt.Fprintf(w, "%s Peak memory\n\n", heading)
		fmt.Fprintln(w, "| peak RSS | ours | reference | ours / reference |")
		fmt.Fprintln(w, "|---|--:|--:|--:|")
		for _, m := range r.Memory {
			fmt.Fprintf(w, "| %s | %.1f MiB | %.1f MiB | %s |\n", m.Name, float64(m.Ours)/(1<<20), float64(m.Reference)/(1<<20), ratio(m.Ours, m.Reference))
		}
		fmt.Fprintln(w)
	}
}

// casesMarkdown writes the table of times and multiples of the floor.
func (r *Results) casesMarkdown(w io.Writer) {
	fmt.Fprintln(w, "| table | op | runs | floor | ours | reference | ours / floor | reference / floor | ours / reference | getsockopt floor | ours / it |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, c := range r.Cases {
		o, rf, f := Median(c.Ours), Median(c.Reference), Median(c.Floor)
		own, ownRatio := "—", "—"
		if len(c.OwnFloor) > 0 {
			of := Median(c.OwnFloor)
			own, ownRatio = ms(of), ratio(o, of)
		}
		fmt.Fprintf(w, "| %s %s×%d | `%s` | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			c.Layout, Thousands(c.Services), c.Dests, Commands[c.Op], len(c.Ours), ms(f), ms(o), ms(rf),
			ratio(o, f), ratio(rf, f), ratio(o, rf), own, ownRatio)
	}
	fmt.Fprintln(w)
}

// pairsMarkdown writes the growth measured in pairs (r.Growth): per
// layout, side and operation the medians of each size, the growth of the
// medians, and the median and range of the rounds' own growth, also with
// each run divided by its speed probe.
func (r *Results) pairsMarkdown(w io.Writer) {
	var probes []int64
	for _, p := range r.Growth {
		probes = append(append(probes, p.SmallProbes...), p.LargeProbes...)
	}
	fmt.Fprint(w, "Growth measured in pairs (each round times both sizes back to back")
	if len(probes) > 0 {
		fmt.Fprintf(w, "; speed probe %s–%s", ms(slices.Min(probes)), ms(slices.Max(probes)))
	}
	fmt.Fprintln(w, "):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| layout | sizes | side | op | rounds | small (median) | large (median) | growth of the medians | the rounds' growth: median (lowest–highest) | the same, each run divided by its probe |")
	fmt.Fprintln(w, "|---|---|---|---|--:|--:|--:|--:|---|---|")
	for _, p := range r.Growth {
		n := min(len(p.SmallRuns), len(p.LargeRuns))
		var raw, scaled []float64
		for i := range n {
			g := float64(p.LargeRuns[i]) / float64(p.SmallRuns[i])
			raw = append(raw, g)
			if i < len(p.SmallProbes) && i < len(p.LargeProbes) {
				scaled = append(scaled, g*float64(p.SmallProbes[i])/float64(p.LargeProbes[i]))
			}
		}
		medS, medL := Median(p.SmallRuns), Median(p.LargeRuns)
		fmt.Fprintf(w, "| %s ×%d | %s → %s | %s | `%s` | %d | %s | %s | %s | %s | %s |\n", p.Layout, p.Dests,
			Thousands(p.Small), Thousands(p.Large), p.Side, Commands[p.Op], n,
			ms(medS), ms(medL), growthRatio(medL, medS), spreadOf(raw), spreadOf(scaled))
	}
	fmt.Fprintln(w)
}

func growthRatio(a, b int64) string {
	if a <= 0 || b <= 0 {
		return "—"
	}
	return fmt.Sprintf("×%.1f", float64(a)/float64(b))
}

// spreadOf formats the median (the upper one of an even count) and range
// of growth ratios.
func spreadOf(r []float64) string {
	if len(r) == 0 {
		return "—"
	}
	r = slices.Clone(r)
	slices.Sort(r)
	return fmt.Sprintf("×%.1f (×%.1f–%.1f)", r[len(r)/2], r[0], r[len(r)-1])
}

// growth lists the growth rows: for each layout and destinations per
// service, each pair of consecutive sizes.
func (r *Results) growth() []string {
	type key struct {
		layout string
		dests  int
	}
	sizes := map[key][]int{}
	for _, c := range r.Cases {
		k := key{c.Layout, c.Dests}
		if !slices.Contains(sizes[k], c.Services) {
			sizes[k] = append(sizes[k], c.Services)
		}
	}
	keys := make([]key, 0, len(sizes))
	for k := range sizes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].layout != keys[j].layout {
			return keys[i].layout < keys[j].layout
		}
		return keys[i].dests < keys[j].dests
	})
	var out []string
	for _, k := range keys {
		s := sizes[k]
		slices.Sort(s)
		for i := 1; i < len(s); i++ {
			for _, op := range Ops {
				a, b := r.Find(k.layout, s[i-1], k.dests, op), r.Find(k.layout, s[i], k.dests, op)
				if a == nil || b == nil {
					continue
				}
				out = append(out, fmt.Sprintf("| %s ×%d | %s → %s | ×%g | `%s` | %s | %s | %s |", k.layout, k.dests,
					Thousands(s[i-1]), Thousands(s[i]), float64(s[i])/float64(s[i-1]), Commands[op],
					ratio(Median(b.Floor), Median(a.Floor)), ratio(Median(b.Ours), Median(a.Ours)), ratio(Median(b.Reference), Median(a.Reference))))
			}
		}
	}
	return out
}

// WriteJSON writes r as an indented JSON document.
func (r *Results) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
