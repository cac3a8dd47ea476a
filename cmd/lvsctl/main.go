// Command lvsctl plans and applies a desired IPVS rule set on a live
// director without dropping connections. See docs/lvsctl.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/lvskit/lvskit/internal/term"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/lvsctl"
)

func main() {
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
