// Command ipvsadm-restore replaces the IPVS table with rules read from
// stdin.
//
// It works like Debian's ipvsadm-restore script: lines starting with "#" are
// dropped, the table is flushed, then the rest is restored with the
// pipelined engine. Input that would make the script destroy rules (a line
// that does not parse, or that the kernel refuses when the input is first
// restored in a scratch network namespace) is refused before the flush, and
// SIGINT or SIGTERM ends the restore after the lines already sent, with a
// report. See wrappers.RestoreMain.
package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/lvskit/lvskit/cmd/internal/ipvsadmenv"
	"github.com/lvskit/lvskit/internal/sysenv"
	"github.com/lvskit/lvskit/ipvsadm/wrappers"
)

func main() {
	sysenv.SmallPages()
	sysenv.SpareProcessor()
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, os.Interrupt, syscall.SIGTERM)
	interrupt := make(chan os.Signal, 1)
	go func() {
		s := <-caught
		// A second signal kills at once, as it would without us.
		signal.Reset(os.Interrupt, syscall.SIGTERM)
		interrupt <- s
	}()
	os.Exit(wrappers.RestoreMain(os.Args, os.Stdin, os.Stdout, os.Stderr,
		wrappers.RestoreEnv{Env: ipvsadmenv.Ipvsadm(), Scratch: sysenv.OpenScratch, Getenv: os.Getenv, Interrupt: interrupt}))
}
