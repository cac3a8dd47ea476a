// Command lvsprep prepares hosts for Linux IPVS.
//
// It prepares directors (VS/NAT, full-NAT, ECMP) and real servers (VS/DR,
// VS/TUN, VS/NAT). See docs/lvsprep.md. The host it prepares is this one, in
// the current network namespace, loading modules with modprobe(8)
// (modprobe.go).
package main

import (
	"os"

	"github.com/lvskit/lvskit/lvsprep"
)

func main() {
	os.Exit(lvsprep.Main(os.Args, os.Stdin, os.Stdout, os.Stderr, lvsprep.RealHost(modprobe{})))
}
