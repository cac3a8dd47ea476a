package run

import (
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
)

// checkerProcs gives lvsctl run one P on a single CPU, where its main
// gives every command two (sysenv.SpareProcessor): the checker's
// goroutines (its scheduler, the shared poller, one per probe other than
// TCP) then never wake a second thread to run them, which costs CPU per
// probe (figures: decision 0014), and a reload holds the probes
// (health.Checker.Hold), so it has the P to itself (decision 0013).
func checkerProcs() {
	if os.Getenv("GOMAXPROCS") == "" && runtime.NumCPU() < 2 {
		runtime.GOMAXPROCS(1)
	}
}

// minMemoryLimit is the least soft memory limit lvsctl run sets.
const minMemoryLimit = 56 << 20

// fitMemoryLimit sets lvsctl run's soft memory limit to twice what its
// heap holds, and at least minMemoryLimit, unless the environment sets
// GOMEMLIMIT: GOGC alone lets the runtime's other memory come on top of
// twice the heap. Run calls it after each reconcile, as the table it
// keeps grows or shrinks (decision 0013).
func fitMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	var live int64
	if s[0].Value.Kind() == rtmetrics.KindUint64 {
		live = int64(s[0].Value.Uint64())
	}
	debug.SetMemoryLimit(max(minMemoryLimit, 2*live))
}
