// Command lvsctl plans and applies IPVS rule sets without dropping
// connections.
//
// See docs/lvsctl.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/lvskit/lvskit/internal/sysenv"
	"github.com/lvskit/lvskit/internal/term"
	"github.com/lvskit/lvskit/lvsctl"
)

func main() {
	sysenv.SmallPagesFromStart()
	sysenv.SpareProcessor()
	if os.Getenv("GOGC") == "" {
		// lvsctl keeps the desired rule set until it exits, so collecting
		// more often only costs time (docs/decisions/0013-runtime-settings.md).
		debug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	env := lvsctl.Env{Open: sysenv.OpenIPVS, Terminal: term.IsTerminal(os.Stdout), Context: ctx}
	reload := make(chan os.Signal, 1)
	signal.Notify(reload, syscall.SIGHUP) // lvsctl run reloads; the others ignore it
	env.Reload = reload
	code := lvsctl.Main(os.Args, os.Stdin, os.Stdout, os.Stderr, env)
	stop()
	os.Exit(code)
}
