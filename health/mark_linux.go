package health

import (
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// markControl returns a net.Dialer Control that sets SO_MARK to mark.
func markControl(mark uint32) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark))
		}); err != nil {
			return &markError{mark, err}
		}
		if serr != nil {
			return &markError{mark, serr}
		}
		return nil
	}
}

// sourceToward is the address the kernel picks to reach addr: a connected
// datagram socket looks the route up and sends nothing. Raw system calls,
// as it runs before every via-vip probe: a net.Conn would also register
// with the poller.
func sourceToward(addr netip.Addr) (netip.Addr, error) {
	family, sa := unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{Port: 9, Addr: addr.As16()})
	if addr.Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: 9, Addr: addr.As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return netip.Addr{}, err
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, sa); err != nil {
		return netip.Addr{}, err
	}
	local, err := unix.Getsockname(fd)
	if err != nil {
		return netip.Addr{}, err
	}
	switch l := local.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrFrom4(l.Addr), nil
	case *unix.SockaddrInet6:
		return netip.AddrFrom16(l.Addr), nil
	}
	return netip.Addr{}, fmt.Errorf("local address of family %T", local)
}
