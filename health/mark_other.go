//go:build !linux

package health

import (
	"errors"
	"net/netip"
	"syscall"
)

// markControl refuses: SO_MARK is Linux's.
func markControl(mark uint32) func(network, address string, c syscall.RawConn) error {
	return func(string, string, syscall.RawConn) error {
		return &markError{mark, errors.New("not on this system (Linux only)")}
	}
}

// sourceToward refuses: via-vip probes need SO_MARK, which is Linux's.
func sourceToward(netip.Addr) (netip.Addr, error) {
	return netip.Addr{}, errors.New("not on this system (Linux only)")
}
