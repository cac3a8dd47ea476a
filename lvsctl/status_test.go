package lvsctl

import (
	"slices"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/lvsctl/record"
)

// TestStatusWeight: status shows the weight each checked real server has
// in the kernel's table by run's record (0 held out, a dynamic check's
// weight, else the file's), with the file's beside it when they differ;
// --json gives both.
func TestStatusWeight(t *testing.T) {
	dyn := func(v uint32) *uint32 { return &v }
	type want struct {
		text           string
		weight, config uint32
	}
	cases := []struct {
		dest  string
		file  uint32
		in    bool
		state health.State
		dyn   *uint32
		want  want
	}{
		{"192.168.1.1:80", 5, true, health.Up, nil, want{"5", 5, 5}},
		{"192.168.1.2:80", 5, true, health.Up, dyn(3), want{"3 (file 5)", 3, 5}},
		{"192.168.1.3:80", 5, false, health.Down, nil, want{"0 (file 5)", 0, 5}},
		{"192.168.1.4:80", 4, true, health.Up, dyn(4), want{"4", 4, 4}},
		{"192.168.1.5:80", 2, true, health.Down, nil, want{"2", 2, 2}}, // kept in: its service's checks all failed
		{"192.168.1.6:80", 0, true, health.Up, nil, want{"0", 0, 0}},
	}
	st := &record.Run{}
	for _, c := range cases {
		st.Servers = append(st.Servers, record.Server{Service: "-t 10.0.0.1:80", Destination: c.dest, InService: c.in, Weight: c.file,
			Check: "exec", Health: health.TargetState{State: c.state, Weight: c.dyn}})
	}
	var b strings.Builder
	if err := (&runner{out: &b}).writeRunStatus(st); err != nil {
		t.Fatal(err)
	}
	// The table's rows: "| SERVICE | REAL SERVER | SERVING | WEIGHT | ...".
	rows := map[string][]string{}
	col := -1
	for _, l := range strings.Split(b.String(), "\n") {
		cells := strings.Split(l, "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if i := slices.Index(cells, "WEIGHT"); i >= 0 {
			col = i
		} else if len(cells) > 3 {
			rows[cells[2]] = cells
		}
	}
	if col < 0 {
		t.Fatalf("no WEIGHT column:\n%s", b.String())
	}
	for _, c := range cases {
		if r := rows[c.dest]; len(r) <= col || r[col] != c.want.text {
			t.Errorf("%s: row %q, want WEIGHT %q\n%s", c.dest, r, c.want.text, b.String())
		}
	}
	for i, s := range toJSONRun(st).Servers {
		if w := cases[i].want; s.Weight != w.weight || s.ConfiguredWeight != w.config {
			t.Errorf("--json %s: weight %d, configured_weight %d; want %d, %d", s.Destination, s.Weight, s.ConfiguredWeight, w.weight, w.config)
		}
	}
}
