//go:build lab

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lvskit/lvskit/bench/benchdata"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/lab/labtest"
)

// growthConfig is how TestGrowth measures: each round restores, lists
// and saves the small and then the large table (or the other way round)
// of every layout, back to back, by each side.
type growthConfig struct {
	small, large, dests, rounds int
	layouts                     []layout
}

var (
	growthFull  = growthConfig{small: 1000, large: 10000, dests: 10, rounds: 11, layouts: []layout{spread, fwmark, ports, ipv6, shared}}
	growthSmoke = growthConfig{small: 100, large: 1000, dests: 10, rounds: 2, layouts: []layout{spread, fwmark}}
)

// TestGrowth measures how each of our operations (-R, -Ln, -Sn, lvsctl
// apply of 1 % changes, -Z, -C) and the floor's restore, listing, zero
// and flush grow from the small table to the large one (1,000 and
// 10,000 × 10 at full size), with the two sizes measured back to back by
// the same side in every round, and prints the growth table of
// docs/benchmarks.md and the results for bench/benchplot.
//
// TestBenchmarks measures the sizes minutes or hours apart, while the
// VM's speed drifts by up to 1.7× in phases of seconds to minutes, so a
// growth figure from two medians carries the ratio of two phases' speeds
// (decision 0012). A pair of runs a few seconds apart mostly falls within
// one phase, so the median of the rounds' ratios is the growth with the
// drift mostly cancelled; the growth of the medians is printed beside it.
// Every timed run takes a speed probe (a fixed loop in this process, see
// probeRuns) right after its idle wait and another right after it; the
// last column divides each run by its probe.
//
// It asserts what TestBenchmarks does of a restore (it succeeds, with
// nothing on stderr), that the namespace then holds all of the table's
// services, that our -Ln and -Sn succeed with a line for every service
// and destination, that lvsctl apply converges and leaves every
// service, and that the zero and the flush succeed; never durations.
func TestGrowth(t *testing.T) {
	labtest.Require(t)
	cfg := chooseConfig(t)
	idleSpells = cfg.idleSpells
	probeRuns = true
	t.Cleanup(func() { probeRuns = false })
	g := growthSmoke
	if cfg.mode == "full" {
		g = growthFull
	}
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal")
	res := &benchdata.Results{Mode: cfg.mode}
	for _, l := range g.layouts {
		var tabs [2]*table
		var paths, changed [2]string
		for i, n := range []int{g.small, g.large} {
			tab, err := newTable(l, n, g.dests)
			if err != nil {
				t.Fatal(err)
			}
			tabs[i], paths[i] = tab, writeTable(t, dir, tab)
			changed[i], _ = writeChanged(t, dir, tab)
		}
		pairs := map[side]map[string]*benchdata.Pair{}
		for _, s := range []side{ours, floor} {
			pairs[s] = map[string]*benchdata.Pair{}
			for _, op := range growthOps {
				if s == floor && (op == "save" || op == "apply") {
					continue // see growthOps
				}
				pairs[s][op] = &benchdata.Pair{Layout: string(l), Dests: g.dests, Small: g.small, Large: g.large, Side: s.name, Op: op}
			}
		}
		for round := range g.rounds {
			sides := []side{ours, floor}
			if round%2 == 1 {
				slices.Reverse(sides)
			}
			for _, s := range sides {
				order := []int{0, 1}
				if (round/2)%2 == 1 {
					order = []int{1, 0}
				}
				for _, i := range order {
					runs := measureTable(t, s, tabs[i], paths[i], changed[i], journal)
					for _, op := range growthOps {
						p := pairs[s][op]
						if p == nil {
							continue
						}
						r := runs[op]
						wall, probe := r.wall.Nanoseconds(), r.probe.Nanoseconds()
						if i == 0 {
							p.SmallRuns, p.SmallProbes = append(p.SmallRuns, wall), append(p.SmallProbes, probe)
						} else {
							p.LargeRuns, p.LargeProbes = append(p.LargeRuns, wall), append(p.LargeProbes, probe)
						}
						fmt.Printf("growth round %d: %s %s %s: %s (probe %s)\n", round, s.name, op, tabs[i], ms(wall), ms(probe))
					}
				}
			}
		}
		for _, s := range []side{ours, floor} {
			for _, op := range growthOps {
				if p := pairs[s][op]; p != nil {
					res.Growth = append(res.Growth, *p)
				}
			}
		}
	}

	fmt.Printf("\nGrowth, %s size, %d rounds:\n\n", cfg.mode, g.rounds)
	res.Markdown(os.Stdout)
	if err := res.Write(os.Stdout); err != nil {
		t.Fatal(err)
	}
}

// growthOps are the operations TestGrowth times on each table, in the
// order it runs them. The floor's listing stands for its saving too (both
// ask the kernel the same), so the floor has no "save"; nor an "apply",
// which is a listing and a few requests (TestLvsctlApplyBench measures
// its floor).
var growthOps = []string{"restore", "list", "save", "apply", "zero", "flush"}

// measureTable lets s restore tab into a fresh namespace, checks that
// the namespace then holds tab's services, lists and saves it (ours: -Ln
// and -Sn; the floor: its getsockopt listing, once), lets ours apply
// changed (tab with 1 % of its destinations changed) with lvsctl, zeroes
// and flushes it. Each read (-Ln, -Sn, apply) runs right after an
// unmeasured getsockopt floor listing, as in TestBenchmarks (the
// emulator's TLB).
func measureTable(t *testing.T, s side, tab *table, path, changed, journal string) map[string]result {
	t.Helper()
	ns := newNetns(t)
	defer ns.close(t)
	out := map[string]result{}
	out["restore"] = s.restore(t, ns, tab, path)
	if n := servicesIn(t, ns); n != len(tab.services) {
		t.Fatalf("%s restored %d services of %s, want %d", s.name, n, tab, len(tab.services))
	}
	if s == floor {
		floorRun(t, ns, "list-getsockopt")
		out["list"] = floorRun(t, ns, "list-getsockopt")
	} else {
		for _, op := range []string{"list", "save"} {
			floorRun(t, ns, "list-getsockopt")
			r := run(t, ns, "", s.ipvsadm, benchdata.Commands[op])
			lines := strings.Count(r.stdout, "\n")
			want := len(tab.services) * (1 + tab.dests)
			if op == "list" {
				want += 3 // the version line and the two column heads
			}
			if r.code != 0 || r.stderr != "" || lines != want {
				t.Fatalf("%s %s of %s: status %d, %d lines (want %d), %s", s.name, benchdata.Commands[op], tab, r.code, lines, want, clip(r.stderr))
			}
			out[op] = r
		}
		floorRun(t, ns, "list-getsockopt")
		r := run(t, ns, changed, labtest.Ours("lvsctl"), "apply", "--drain-timeout", "0", "--journal-dir", journal, "-")
		if r.code != 0 || !strings.Contains(r.stdout, "converged") {
			t.Fatalf("lvsctl apply to %s: %+v", tab, clipResult(r))
		}
		if n := servicesIn(t, ns); n != len(tab.services) {
			t.Fatalf("lvsctl apply left %d services of %s, want %d", n, tab, len(tab.services))
		}
		out["apply"] = r
	}
	for _, op := range []string{"zero", "flush"} {
		r := s.do(t, ns, op)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("%s %s of %s: status %d, %s", s.name, benchdata.Commands[op], tab, r.code, clip(r.stderr))
		}
		out[op] = r
	}
	return out
}

// servicesIn counts the services of namespace ns (one service dump).
func servicesIn(t *testing.T, ns *netns) int {
	t.Helper()
	var n int
	inNetns(t, ns, func() {
		c, err := ipvs.Open()
		if err == nil {
			var svcs []ipvs.ServiceEntry
			svcs, err = c.Services()
			c.Close()
			n = len(svcs)
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	return n
}

// speedProbe times a fixed computation in this process: the VM's speed
// at the moment, for the reader of the output (see TestGrowth).
func speedProbe() time.Duration {
	start := time.Now()
	x := uint64(os.Getpid())
	for range 20_000_000 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	d := time.Since(start)
	if x == 0 { // keep the loop; an xorshift state never becomes 0
		panic("speed probe")
	}
	return d
}
