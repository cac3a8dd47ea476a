//go:build !linux

package health

import (
	"context"
	"errors"
	"net/netip"
)

// probePing refuses: lvsctl's ICMP probes are Linux's.
func probePing(_ context.Context, addr netip.Addr, _ uint32) error {
	return errors.New("ping " + addr.String() + ": not on this system (Linux only)")
}
