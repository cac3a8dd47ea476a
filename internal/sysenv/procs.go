package sysenv

import (
	"os"
	"runtime"
)

// SpareProcessor gives the Go scheduler at least two Ps (GOMAXPROCS 2)
// on a machine, container or guest with a single CPU, unless the
// environment sets GOMAXPROCS; the mains that talk to the kernel call it
// first. Their one goroutine spends most of its time in long system
// calls, and with a single P the runtime's monitor thread takes the P
// from each of them and polls every 20 µs on the CPU the call needs; with
// a second, idle P it leaves them alone (decision 0013).
func SpareProcessor() {
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
}
