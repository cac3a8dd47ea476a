package e2e

import (
	"context"
	"net"
)

// acceptLoop accepts connections on ln and hands each to accepted, which
// must not block (it starts the connection's goroutine), until ctx ends:
// then it closes ln and returns nil. Another accept error is returned.
func acceptLoop(ctx context.Context, ln net.Listener, accepted func(net.Conn)) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		accepted(c)
	}
}
