// Package osenv builds each command's environment on the running system,
// from package sysenv: every main passes its command's Main the streams,
// the arguments and what osenv gives it.
package osenv

import (
	"context"
	"os"

	"github.com/lvskit/lvskit/internal/sysenv"
	"github.com/lvskit/lvskit/internal/term"
	"github.com/lvskit/lvskit/ipvsadm"
	"github.com/lvskit/lvskit/lvsctl"
	"github.com/lvskit/lvskit/lvsprep"
	"github.com/lvskit/lvskit/names"
)

// Ipvsadm is the environment ipvsadm, ipvsadm-save and ipvsadm-restore
// run with.
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

// Lvsctl is the environment lvsctl runs with; ctx ends an apply's drain
// (the main ends it on SIGINT and SIGTERM).
func Lvsctl(ctx context.Context) lvsctl.Env {
	return lvsctl.Env{Open: sysenv.OpenIPVS, Terminal: term.IsTerminal(os.Stdout), Context: ctx}
}

// Lvsprep is the machine lvsprep prepares: this one, in the current network
// namespace, loading modules with modprobe(8).
func Lvsprep() *lvsprep.Host { return lvsprep.RealHost(sysenv.Modprobe{}) }
