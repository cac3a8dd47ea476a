//go:build !linux

package sysenv

import "os"

// DieOfSegfault exits with the status a shell shows for a process SIGSEGV
// killed: off Linux there is no IPVS, and no byte-exact crash to reproduce.
func DieOfSegfault() { os.Exit(128 + 11) }
