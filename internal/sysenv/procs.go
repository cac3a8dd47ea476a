package sysenv

import (
	"os"
	"runtime"
)

// SpareProcessor gives the Go scheduler at least two Ps (GOMAXPROCS 2)
// on a machine, container or guest with a single CPU, unless the
// environment sets GOMAXPROCS; the mains that talk to the kernel call it
// first. These programs run one goroutine that spends most of its time
// in long system calls (the kernel building a dump, walking a hash
// chain, adding a batch of destinations). With a single P, the runtime's
// monitor thread (sysmon) takes the P away from any system call that
// outlasts one of its ticks, because no other P is idle, and while it
// keeps taking Ps it polls every 20 µs: on one CPU those wake-ups are
// taken from the system call itself. With a second, idle P it leaves a
// system call alone for 10 ms and sleeps longer. In the lab VM (one
// CPU), -Ln of 10,000 IPv6 services × 10 took 1.45–1.88 s with two Ps
// against 1.83–2.49 s with one, ten alternating cycles
// (docs/benchmarks-history.md, session 13).
func SpareProcessor() {
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
}
