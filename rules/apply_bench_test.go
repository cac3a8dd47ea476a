package rules_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"github.com/lvskit/lvskit/rules"
	"github.com/lvskit/lvskit/rules/desired"
)

// benchRules writes an n×10 rules file; with changed, one destination in
// 100 differs (weights and replacements), as the lab's apply benchmark.
func benchRules(n int, changed bool) []byte {
	var b strings.Builder
	k := 0
	for i := range n {
		x, y := i/250, i%250+1
		fmt.Fprintf(&b, "-A -t 10.%d.%d.%d:80 -s wlc\n", x/250, x%250, y)
		for j := 1; j <= 10; j++ {
			k++
			w, a := 1, j
			if changed && k%100 == 0 {
				if (k/100)%2 == 0 {
					w = 5
				} else {
					a = j + 100
				}
			}
			fmt.Fprintf(&b, "-a -t 10.%d.%d.%d:80 -r 192.168.%d.%d:80 -m -w %d\n", x/250, x%250, y, a, y, w)
		}
	}
	return []byte(b.String())
}

// benchKernel is a fake holding the unchanged 10,000×10 table, and that
// table as a desired set.
func benchKernel(b *testing.B) (*ipvstest.Fake, *rules.Set) {
	base, err := desired.ReadText("base", benchRules(10000, false), nil)
	if err != nil {
		b.Fatal(err)
	}
	f := ipvstest.New()
	a := &rules.Applier{Client: f}
	if failed, err := a.Changes(rules.Diff(&rules.Set{}, base, rules.DiffOptions{})); err != nil || len(failed) > 0 {
		b.Fatal(err, failed)
	}
	return f, base
}

// BenchmarkApplyUserPart is lvsctl apply's own work on a 10,000×10 table
// with 1 % of its destinations changed: reading the file, reading the
// table (from the fake: no netlink decoding) and planning.
func BenchmarkApplyUserPart(b *testing.B) {
	f, _ := benchKernel(b)
	changed := benchRules(10000, true)
	b.ReportAllocs()
	for b.Loop() {
		want, err := desired.ReadText("changed", changed, nil)
		if err != nil {
			b.Fatal(err)
		}
		p, err := rules.DiffKernel(f, want, rules.DiffOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Changes) != 1500 {
			b.Fatalf("%d changes", len(p.Changes))
		}
	}
}

// BenchmarkReadDesired is the reading of the 10,000×10 file alone.
func BenchmarkReadDesired(b *testing.B) {
	changed := benchRules(10000, true)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := desired.ReadText("changed", changed, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanInSync is the planning of an in-sync apply (the second
// apply of a file) on a 10,000×10 table: lvsctl's own part of the plan,
// with neither the file nor the kernel read.
func BenchmarkPlanInSync(b *testing.B) {
	f, want := benchKernel(b)
	kernel, err := rules.Read(f)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if p := rules.Diff(kernel, want, rules.DiffOptions{}); !p.InSync() {
			b.Fatalf("%d changes", len(p.Changes))
		}
	}
}
