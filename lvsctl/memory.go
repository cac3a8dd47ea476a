package lvsctl

import (
	"os"
	"runtime"
	"runtime/debug"
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

// checkerProcs gives lvsctl run one P on a single CPU, where its main
// gives every command two (sysenv.SpareProcessor): the probes' many short
// goroutines then never wake a second thread to run them, 8 % less CPU
// per probe, and a reload holds the probes (health.Checker.Hold), so it
// has the P to itself (decision 0013).
func checkerProcs() {
	if os.Getenv("GOMAXPROCS") == "" && runtime.NumCPU() < 2 {
		runtime.GOMAXPROCS(1)
	}
}
