// Package sysenv is the running system as the mains use it.
//
// It holds the kernel's IPVS (OpenIPVS, OpenScratch), ipvsadm's modprobe
// (ModprobeIPVS), popt's POSIX switches, the process's memory and CPU
// settings, and ipvsadm's crash (DieOfSegfault). It imports no command, so
// that every binary links only what its own command needs.
package sysenv

import (
	"os"
	"os/exec"

	"github.com/lvskit/lvskit/ipvs"
)

// OpenIPVS returns the netlink client as an ipvs.Client (a nil *ipvs.Conn
// must not become a non-nil interface).
func OpenIPVS() (ipvs.Client, error) {
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

// ModprobeIPVS loads the ip_vs module the way ipvsadm does: /sbin/modprobe
// with our standard streams, success only if it exits 0.
func ModprobeIPVS() error {
	cmd := exec.Command("/sbin/modprobe", "--", "ip_vs")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd.Run()
}

// PoptPosix reports whether popt takes arguments in POSIX order: when
// POSIXLY_CORRECT or POSIX_ME_HARDER is set, even to the empty string.
func PoptPosix() bool {
	_, posix := os.LookupEnv("POSIXLY_CORRECT")
	_, harder := os.LookupEnv("POSIX_ME_HARDER")
	return posix || harder
}
