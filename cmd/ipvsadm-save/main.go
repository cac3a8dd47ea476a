// Command ipvsadm-save prints the IPVS table as ipvsadm rules, like
// Debian's ipvsadm-save script: "-n" for numeric output, any other option
// prints a usage note and exits 1. See rules.SaveScript.
package main

import (
	"os"

	"github.com/lvskit/lvskit/internal/sysenv"
	"github.com/lvskit/lvskit/rules"
)

func main() {
	sysenv.SmallPages()
	os.Exit(rules.SaveScript(os.Args, os.Stdout, os.Stderr, sysenv.Ipvsadm()))
}
