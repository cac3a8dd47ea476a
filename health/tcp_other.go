//go:build !linux

package health

import (
	"context"
	"net"
	"net/netip"
)

// probeTCP connects to addr as t's dialer does and resets the connection:
// a pass is a completed handshake.
func probeTCP(ctx context.Context, t *Target, addr netip.AddrPort) error {
	d, err := dialer(*t)
	if err != nil {
		return err
	}
	// Not Dialer.DialTCP: its local address, even the zero AddrPort, is
	// bound before the connect, which takes a port of its own per probe.
	conn, err := d.DialContext(ctx, "tcp", addr.String())
	if err != nil {
		return failure(err, "connect "+addr.String())
	}
	// A reset instead of a FIN leaves no TIME_WAIT socket on the director
	// for every probe.
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	return conn.Close()
}
