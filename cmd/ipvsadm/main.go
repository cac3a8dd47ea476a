// Command ipvsadm administers the Linux kernel's IP Virtual Server tables.
// It is a drop-in replacement for ipvsadm 1.31; see package ipvsadm.
package main

import (
	"os"

	"github.com/lvskit/lvskit/cmd/internal/ipvsadmenv"
	"github.com/lvskit/lvskit/internal/sysenv"
	"github.com/lvskit/lvskit/internal/term"
	"github.com/lvskit/lvskit/ipvsadm"
	"github.com/lvskit/lvskit/ipvsadm/cmdline"
)

func main() {
	sysenv.SmallPages()
	sysenv.SpareProcessor()
	env := ipvsadmenv.Ipvsadm()
	// The C library line-buffers a terminal and fully buffers anything else.
	env.StdoutIsTerminal = term.IsTerminal(os.Stdout)
	status := ipvsadm.Main(os.Args, os.Stdin, os.Stdout, os.Stderr, env)
	if status == cmdline.StatusCrash {
		sysenv.DieOfSegfault()
	}
	os.Exit(status)
}
