// Command ipvsadm-restore replaces the IPVS table with rules read from
// stdin, like Debian's ipvsadm-restore script: lines starting with "#"
// are dropped, the table is flushed, then the rest is restored with the
// pipelined engine. See rules.RestoreScript.
package main

import (
	"os"
	"os/exec"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm"
	"github.com/lvskit/lvskit/names"
	"github.com/lvskit/lvskit/rules"
)

func main() {
	os.Exit(rules.RestoreScript(os.Args, os.Stdin, os.Stdout, os.Stderr, env(), os.Getenv))
}

// env is what the script's "ipvsadm" would run with.
func env() ipvsadm.Env {
	_, posix := os.LookupEnv("POSIXLY_CORRECT")
	if _, ok := os.LookupEnv("POSIX_ME_HARDER"); ok {
		posix = true
	}
	return ipvsadm.Env{
		Open: func() (ipvs.Client, error) {
			c, err := ipvs.Open()
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		Modprobe: modprobe,
		Resolver: names.NewResolver(),
		Posix:    posix,
		// ipvsadm -R restores with the pipelined engine.
		RestoreEngine: rules.Pipelined(rules.DefaultWindow),
	}
}

// modprobe loads the ip_vs module as ipvsadm does.
func modprobe() error {
	cmd := exec.Command("/sbin/modprobe", "--", "ip_vs")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd.Run()
}
