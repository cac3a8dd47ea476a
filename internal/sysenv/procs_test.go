package sysenv

import (
	"runtime"
	"testing"
)

// TestSpareProcessor: one P becomes two unless GOMAXPROCS is set in the
// environment; more than two stay as they are.
func TestSpareProcessor(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	t.Setenv("GOMAXPROCS", "")
	for _, tc := range []struct{ before, after int }{{1, 2}, {2, 2}, {3, 3}} {
		runtime.GOMAXPROCS(tc.before)
		SpareProcessor()
		if got := runtime.GOMAXPROCS(0); got != tc.after {
			t.Errorf("GOMAXPROCS %d: %d after SpareProcessor, want %d", tc.before, got, tc.after)
		}
	}
	t.Setenv("GOMAXPROCS", "1")
	runtime.GOMAXPROCS(1)
	SpareProcessor()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS=1 in the environment: %d Ps after SpareProcessor, want 1", got)
	}
}
