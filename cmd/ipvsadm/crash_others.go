//go:build !linux

package main

import (
	"os"

	"github.com/lvskit/lvskit/ipvsadm"
)

// dieOfSegfault exits with the status a shell shows for SIGSEGV: off Linux
// there is no IPVS, and no byte-exact crash to reproduce.
func dieOfSegfault() { os.Exit(ipvsadm.StatusCrash) }
