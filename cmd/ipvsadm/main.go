// Command ipvsadm administers the Linux kernel's IP Virtual Server tables.
// It is a drop-in replacement for ipvsadm 1.31; see package ipvsadm.
package main

import (
	"os"
	"os/exec"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm"
	"github.com/lvskit/lvskit/names"
	"github.com/lvskit/lvskit/rules"
	"golang.org/x/sys/unix"
)

func main() {
	// popt switches to POSIX argument order when either variable is set,
	// even to the empty string.
	_, posix := os.LookupEnv("POSIXLY_CORRECT")
	if _, ok := os.LookupEnv("POSIX_ME_HARDER"); ok {
		posix = true
	}
	status := ipvsadm.Main(os.Args, os.Stdin, os.Stdout, os.Stderr, ipvsadm.Env{
		Open:     open,
		Modprobe: modprobe,
		Resolver: names.NewResolver(),
		Posix:    posix,
		// -R sends its changes pipelined on one socket; same output.
		RestoreEngine: rules.Pipelined(rules.DefaultWindow),
		// The C library line-buffers a terminal and fully buffers
		// anything else.
		StdoutIsTerminal: isTerminal(os.Stdout),
	})
	if status == ipvsadm.StatusCrash {
		dieOfSegfault()
	}
	os.Exit(status)
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

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
