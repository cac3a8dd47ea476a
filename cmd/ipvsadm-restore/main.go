// Command ipvsadm-restore replaces the IPVS table with rules read from
// stdin, like Debian's ipvsadm-restore script: lines starting with "#"
// are dropped, the table is flushed, then the rest is restored with the
// pipelined engine. See rules.RestoreScript.
package main

import (
	"os"

	"github.com/lvskit/lvskit/internal/sysenv"
	"github.com/lvskit/lvskit/rules"
)

func main() {
	sysenv.SmallPages()
	os.Exit(rules.RestoreScript(os.Args, os.Stdin, os.Stdout, os.Stderr, sysenv.Ipvsadm(), os.Getenv))
}
