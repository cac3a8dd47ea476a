package benchdata

import (
	"bytes"
	"slices"
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
	first.Merge(back)
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
		t.Errorf("start-up after the merge: %+v", first.Startup)
	}
}
