// Package ipvsadmenv builds the environment of the three ipvsadm programs.
//
// ipvsadm, ipvsadm-save and ipvsadm-restore get it on the running system
// from package sysenv: the three mains share it, and it imports no other
// command, so their binaries stay small.
package ipvsadmenv

import (
	"github.com/lvskit/lvskit/internal/sysenv"
	"github.com/lvskit/lvskit/ipvsadm"
	"github.com/lvskit/lvskit/names"
)

// Ipvsadm is the environment the three programs run with.
func Ipvsadm() ipvsadm.Env {
	return ipvsadm.Env{
		Open:     sysenv.OpenIPVS,
		Modprobe: sysenv.ModprobeIPVS,
		Resolver: names.NewResolver(),
		Posix:    sysenv.PoptPosix(),
		// -R sends its changes pipelined on one socket; same output.
		RestoreEngine: ipvsadm.Pipelined(ipvsadm.DefaultWindow),
	}
}
