// Command ipvsadm-save prints the IPVS table as ipvsadm rules.
//
// It works like Debian's ipvsadm-save script: "-n" for numeric output, any
// other option prints a usage note and exits 1. See wrappers.SaveMain.
package main

import (
	"os"

	"github.com/lvskit/lvskit/cmd/internal/ipvsadmenv"
	"github.com/lvskit/lvskit/internal/sysenv"
	"github.com/lvskit/lvskit/ipvsadm/wrappers"
)

func main() {
	sysenv.SmallPages()
	sysenv.SpareProcessor()
	os.Exit(wrappers.SaveMain(os.Args, os.Stdin, os.Stdout, os.Stderr, ipvsadmenv.Ipvsadm()))
}
