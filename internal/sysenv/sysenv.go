// Package sysenv wires the commands to the running system: the kernel's
// netlink interface, /sbin/modprobe, the system's name files, popt's POSIX
// switches, the process's memory and CPU settings, and ipvsadm's crash
// (DieOfSegfault). It is application wiring shared by the mains, not a
// library: it is where running modprobe and ending the process are allowed.
package sysenv

import (
	"os"
	"os/exec"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm"
	"github.com/lvskit/lvskit/names"
)

// Ipvsadm is the environment ipvsadm runs with on this system.
func Ipvsadm() ipvsadm.Env {
	// popt switches to POSIX argument order when either variable is set,
	// even to the empty string.
	_, posix := os.LookupEnv("POSIXLY_CORRECT")
	if _, ok := os.LookupEnv("POSIX_ME_HARDER"); ok {
		posix = true
	}
	return ipvsadm.Env{
		Open:     open,
		Modprobe: modprobe,
		Resolver: names.NewResolver(),
		Posix:    posix,
		// -R sends its changes pipelined on one socket; same output.
		RestoreEngine: ipvsadm.Pipelined(ipvsadm.DefaultWindow),
	}
}

// open returns the netlink client as an ipvs.Client (a nil *ipvs.Conn must
// not become a non-nil interface).
func open() (ipvs.Client, error) {
	c, err := ipvs.Open()
	if err != nil {
		return nil, err
	}
	return c, nil
}

// OpenScratch connects to IPVS in a new, empty network namespace of its
// own (ipvs.OpenScratch), where ipvsadm-restore tries its input first.
func OpenScratch() (ipvs.Client, error) {
	c, err := ipvs.OpenScratch()
	if err != nil {
		return nil, err
	}
	return c, nil
}

// modprobe loads the ip_vs module the way ipvsadm does: /sbin/modprobe with
// our standard streams, success only if it exits 0.
func modprobe() error {
	cmd := exec.Command("/sbin/modprobe", "--", "ip_vs")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd.Run()
}
