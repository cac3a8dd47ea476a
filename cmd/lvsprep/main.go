// Command lvsprep prepares hosts for Linux IPVS: directors (VS/NAT,
// full-NAT, ECMP) and real servers (VS/DR, VS/TUN, VS/NAT). See
// docs/lvsprep.md.
package main

import (
	"os"

	"github.com/lvskit/lvskit/cmd/internal/osenv"
	"github.com/lvskit/lvskit/lvsprep"
)

func main() {
	os.Exit(lvsprep.Main(os.Args, os.Stdin, os.Stdout, os.Stderr, osenv.Lvsprep()))
}
