// Command lvsctl plans and applies a desired IPVS rule set on a live
// director without dropping connections. See docs/lvsctl.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/lvskit/lvskit/internal/sysenv"
	"github.com/lvskit/lvskit/internal/term"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/lvsctl"
)

func main() {
	sysenv.SpareProcessor()
	if os.Getenv("GOGC") == "" {
		// lvsctl keeps the desired rule set until it exits, so the
		// collector reclaims little and only costs time (decision 0013).
		// GOGC in the environment still decides.
		debug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := lvsctl.Run(os.Args[1:], os.Stdout, os.Stderr, lvsctl.Env{
		Open: func() (ipvs.Client, error) {
			c, err := ipvs.Open()
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		Stdin:    os.Stdin,
		Terminal: term.IsTerminal(os.Stdout),
		Context:  ctx,
	})
	stop()
	os.Exit(code)
}
