//go:build linux

package labtest

import (
	"slices"
	"strings"
	"testing"
)

// This file holds the differential comparison of a command run by the
// reference and by ours, each in a fresh namespace.

// Outcome is what one side did with one input: the command's result and
// the table it left, saved by the reference's -Sn and by ours.
type Outcome struct {
	Run               Result
	RefSave, OursSave Result
}

// InFreshNetns runs steps in a subtest with a new network namespace and
// returns what they left.
func InFreshNetns(t *testing.T, name string, steps func(t *testing.T) Result) Outcome {
	t.Helper()
	var o Outcome
	t.Run(name, func(t *testing.T) {
		Netns(t)
		o.Run = steps(t)
		o.RefSave = RunClean(t, "", RefIpvsadm, "-Sn")
		o.OursSave = RunClean(t, "", Ours("ipvsadm"), "-Sn")
	})
	return o
}

// CompareOutcomes requires the same output and status, and tables that
// save alike: exactly when exact is set (ipvsadm's sort cannot depend on
// the kernel's dump order, which differs between namespaces), else as sets
// of lines. In each namespace our -Sn must print exactly what the
// reference's does.
func CompareOutcomes(t *testing.T, what string, ref, ours Outcome, exact bool) {
	t.Helper()
	if ref.Run != ours.Run {
		t.Errorf("%s:\nreference: status %d\nstdout %q\nstderr %q\nours: status %d\nstdout %q\nstderr %q",
			what, ref.Run.Code, ref.Run.Stdout, ref.Run.Stderr, ours.Run.Code, ours.Run.Stdout, ours.Run.Stderr)
	}
	for _, o := range []Outcome{ref, ours} {
		if o.RefSave != o.OursSave {
			t.Errorf("%s: our -Sn differs from the reference's on the same table:\n%+v\n%+v", what, o.OursSave, o.RefSave)
		}
	}
	a, b := ref.RefSave.Stdout, ours.RefSave.Stdout
	if exact && a != b || !exact && !SameLines(a, b) {
		t.Errorf("%s: the tables differ (exact comparison %v):\nrestored by the reference:\n%s\nrestored by ours:\n%s", what, exact, a, b)
	}
}

// SameLines reports whether a and b hold the same lines in any order.
func SameLines(a, b string) bool {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	slices.Sort(la)
	slices.Sort(lb)
	return slices.Equal(la, lb)
}
