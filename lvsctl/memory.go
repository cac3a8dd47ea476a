package lvsctl

import (
	"os"
	"runtime/debug"
	rtmetrics "runtime/metrics"
)

// longRunning gives a command that runs for hours (run, top) the
// collector's default pace, unless the environment sets GOGC: lvsctl's
// one-shot commands collect less often (GOGC=400, decision 0013), which
// would let a daemon's heap grow to five times what it holds.
func longRunning() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(100)
	}
}

// memoryFloor is the least soft memory limit run sets.
const memoryFloor = 56 << 20

// boundMemory returns to the system what a load of FILE left over and sets
// the runtime's soft memory limit to twice the live heap, at least
// memoryFloor, unless the environment sets GOMEMLIMIT: the garbage of the
// next reload then makes the collector run sooner instead of the process
// grow (docs/decisions/0013-runtime-settings.md).
func boundMemory() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.FreeOSMemory()
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	var live int64
	if s[0].Value.Kind() == rtmetrics.KindUint64 {
		live = int64(s[0].Value.Uint64())
	}
	debug.SetMemoryLimit(max(memoryFloor, 2*live))
}
