// Command ipvsadm-save prints the IPVS table as ipvsadm rules, like
// Debian's ipvsadm-save script: "-n" for numeric output, any other option
// prints a usage note and exits 1. See rules.SaveScript.
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
	os.Exit(rules.SaveScript(os.Args, os.Stdout, os.Stderr, env()))
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
	}
}

// modprobe loads the ip_vs module as ipvsadm does.
func modprobe() error {
	cmd := exec.Command("/sbin/modprobe", "--", "ip_vs")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd.Run()
}
