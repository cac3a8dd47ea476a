package benchdata

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestMergeReplacesTables: a later run's table replaces the earlier run's
// same table and operation whole (its runs are of one boot), other tables
// are added, and the results survive the log round trip.
func TestMergeReplacesTables(t *testing.T) {
	first := &Results{Mode: "full",
		Startup: &Case{Op: "list", Ours: []int64{1}},
		Cases: []Case{
			{Layout: "spread", Services: 1000, Dests: 10, Op: "list", Ours: []int64{5, 6, 7}},
			{Layout: "spread", Services: 1000, Dests: 10, Op: "save", Ours: []int64{8}},
		},
		Memory: []Memory{{Name: "a", Ours: 1}},
	}
	later := &Results{Mode: "full",
		Cases: []Case{
			{Layout: "spread", Services: 1000, Dests: 10, Op: "list", Ours: []int64{9}},
			{Layout: "spread", Services: 10000, Dests: 100, Op: "list", Ours: []int64{10}},
		},
		Memory: []Memory{{Name: "a", Ours: 2}, {Name: "b", Ours: 3}},
	}
	var log bytes.Buffer
	log.WriteString("noise\n")
	if err := later.Write(&log); err != nil {
		t.Fatal(err)
	}
	back, err := Read(&log)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Merge(back); err != nil {
		t.Fatal(err)
	}
	if got := first.Find("spread", 1000, 10, "list").Ours; !slices.Equal(got, []int64{9}) {
		t.Errorf("replaced case has runs %v, want [9]", got)
	}
	if got := first.Find("spread", 1000, 10, "save").Ours; !slices.Equal(got, []int64{8}) {
		t.Errorf("untouched case has runs %v, want [8]", got)
	}
	if c := first.Find("spread", 10000, 100, "list"); c == nil || !slices.Equal(c.Ours, []int64{10}) {
		t.Errorf("added case: %+v", c)
	}
	if len(first.Cases) != 3 {
		t.Errorf("%d cases after the merge, want 3", len(first.Cases))
	}
	if len(first.Memory) != 2 || first.Memory[0].Ours != 2 || first.Memory[1].Name != "b" {
		t.Errorf("memory after the merge: %+v", first.Memory)
	}
	if first.Startup == nil || first.Startup.Ours[0] != 1 {
		t.Errorf("start-up after a merge of a run without one: %+v", first.Startup)
	}
	if err := first.Merge(&Results{Mode: "full", Startup: &Case{Op: "list", Ours: []int64{4}}}); err != nil {
		t.Fatal(err)
	}
	if first.Startup.Ours[0] != 4 {
		t.Errorf("start-up after a merge of a later one: %+v", first.Startup)
	}
}

// TestMergeRefusesOtherMode: a smoke run's results never replace
// full-size ones (make bench-plot merges onto docs/benchmarks.json), and
// the refused merge changes nothing.
func TestMergeRefusesOtherMode(t *testing.T) {
	full := &Results{Mode: "full", Cases: []Case{{Layout: "spread", Services: 100, Dests: 10, Op: "list", Ours: []int64{5}}}}
	smoke := &Results{Mode: "smoke", Cases: []Case{{Layout: "spread", Services: 100, Dests: 10, Op: "list", Ours: []int64{1}}},
		Growth: []Pair{{Layout: "spread"}}}
	if err := full.Merge(smoke); err == nil {
		t.Fatal("a smoke run merged into full-size results")
	}
	if got := full.Find("spread", 100, 10, "list").Ours; !slices.Equal(got, []int64{5}) || len(full.Growth) != 0 {
		t.Errorf("the refused merge changed the results: %v, %d pairs", got, len(full.Growth))
	}
}

// TestReadMergesEveryBlock: a log of TestBenchmarks and TestGrowth holds
// two blocks of results; Read returns both, and the growth pairs replace
// the same pairs of an earlier run.
func TestReadMergesEveryBlock(t *testing.T) {
	bench := &Results{Mode: "full", Cases: []Case{{Layout: "spread", Services: 1000, Dests: 10, Op: "restore", Ours: []int64{7}}}}
	const ms = 1_000_000 // nanoseconds
	pair := func(second int64) Pair {
		return Pair{Layout: "fwmark", Dests: 10, Small: 1000, Large: 10000, Side: "ours", Op: "restore",
			SmallRuns: []int64{100 * ms, second * ms}, LargeRuns: []int64{1000 * ms, 10 * second * ms},
			SmallProbes: []int64{50 * ms, 50 * ms}, LargeProbes: []int64{50 * ms, 100 * ms}}
	}
	growth := &Results{Mode: "full", Growth: []Pair{pair(200)}}
	var log bytes.Buffer
	for _, r := range []*Results{bench, growth} {
		if err := r.Write(&log); err != nil {
			t.Fatal(err)
		}
		log.WriteString("--- PASS\n")
	}
	back, err := Read(&log)
	if err != nil {
		t.Fatal(err)
	}
	if back.Find("spread", 1000, 10, "restore") == nil || len(back.Growth) != 1 {
		t.Fatalf("read back %d cases and %d pairs, want 1 and 1", len(back.Cases), len(back.Growth))
	}
	if err := back.Merge(&Results{Mode: "full", Growth: []Pair{pair(300)}}); err != nil {
		t.Fatal(err)
	}
	if len(back.Growth) != 1 || back.Growth[0].SmallRuns[1] != 300*ms {
		t.Fatalf("pairs after a later run's merge: %+v", back.Growth)
	}
	var md bytes.Buffer
	back.Markdown(&md)
	// Both rounds grew ×10; the second round's probe doubled, so divided
	// by the probes it grew ×5: median (the upper of two) ×10, range 5–10.
	want := "| fwmark ×10 | 1,000 → 10,000 | ours | `-R` | 2 | 300 ms | 3000 ms | ×10.0 | ×10.0 (×10.0–10.0) | ×10.0 (×5.0–10.0) |"
	if !strings.Contains(md.String(), want) {
		t.Errorf("growth table lacks\n%s\nin\n%s", want, md.String())
	}
}
