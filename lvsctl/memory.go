package lvsctl

import (
	"os"
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
