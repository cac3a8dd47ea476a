// Command lvsprep prepares hosts for Linux IPVS: directors (VS/NAT,
// full-NAT) and real servers (VS/DR, VS/TUN, VS/NAT). See docs/lvsprep.md.
package main

import (
	"os"

	"github.com/lvskit/lvskit/lvsprep"
)

func main() {
	os.Exit(lvsprep.Main(os.Args[1:], os.Stdout, os.Stderr))
}
