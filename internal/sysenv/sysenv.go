// Package sysenv wires the ipvsadm programs to the running system: the
// kernel's netlink interface, /sbin/modprobe, the system's name files and
// popt's POSIX switches. It is application wiring shared by the three
// mains (ipvsadm, ipvsadm-save, ipvsadm-restore), not a library: it is
// where running modprobe is allowed.
package sysenv

import (
	"os"
	"os/exec"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm"
	"github.com/lvskit/lvskit/names"
	"github.com/lvskit/lvskit/rules"
	"golang.org/x/sys/unix"
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
		RestoreEngine: rules.Pipelined(rules.DefaultWindow),
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

// modprobe loads the ip_vs module the way ipvsadm does: /sbin/modprobe with
// our standard streams, success only if it exits 0.
func modprobe() error {
	cmd := exec.Command("/sbin/modprobe", "--", "ip_vs")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd.Run()
}

// SmallPages asks the kernel not to back this process's memory with
// transparent huge pages (prctl PR_SET_THP_DISABLE), for the rest of its
// life; the mains call it first. Where THP is "always" (Debian's default)
// each 2 MiB-aligned region of the Go heap that the program touches is
// faulted in as one huge page, so a listing with a few MiB of heap was
// charged 2 MiB per region touched. The programs run for seconds and gain
// nothing from huge pages. Pages faulted before the call stay as they
// are; children (modprobe) inherit the setting, which changes nothing
// for them but their memory use.
func SmallPages() {
	_ = unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0)
}
