package health

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"
)

// probeTCP connects to addr and resets the connection at once: a pass is
// a completed handshake. It works on a raw non-blocking socket, with t's
// mark and, for a via-vip probe, bound to the source toward the real
// server it crosses, as dialer sets them. Most connects to a local or
// veth peer are over when connect returns, so the socket is polled once
// before it waits on connWait; it never joins the runtime's poller.
// Per passing probe: socket, connect, poll, setsockopt, close.
func probeTCP(ctx context.Context, t *Target, addr netip.AddrPort) error {
	var src netip.Addr
	if t.Mark != 0 && t.Through.IsValid() {
		var err error
		if src, err = sourceToward(t.Through); err != nil {
			return failure(err, "route to "+t.Through.String())
		}
	}
	fd, err := connectTCP(ctx, addr, t.Mark, src)
	if err != nil {
		return failure(err, "connect "+addr.String())
	}
	// A reset instead of a FIN leaves no TIME_WAIT socket on the director
	// for every probe.
	_ = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1})
	_ = unix.Close(fd)
	return nil
}

// connectTCP returns a socket connected to addr, with mark as SO_MARK
// (0: none), bound to src when it is valid (port 0: the kernel picks), or
// the connect's error: an errno, a *markError, or ctx's error when ctx
// ends first.
func connectTCP(ctx context.Context, addr netip.AddrPort, mark uint32, src netip.Addr) (int, error) {
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	family, sa, err := tcpSockaddr(addr)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := connectFD(ctx, fd, family, sa, mark, src); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func connectFD(ctx context.Context, fd, family int, sa unix.Sockaddr, mark uint32, src netip.Addr) error {
	if mark != 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, int(mark)); err != nil {
			return &markError{mark, err}
		}
	}
	if src.IsValid() {
		local, err := bindSockaddr(family, src)
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, local); err != nil {
			return err
		}
	}
	switch err := unix.Connect(fd, sa); err {
	case nil:
		return nil
	case unix.EINPROGRESS, unix.EALREADY, unix.EINTR:
	default:
		return err
	}
	// poll's and epoll's event bits are the same on Linux.
	pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	if n, err := unix.Poll(pfd[:], 0); err == nil && n == 1 {
		return connectResult(fd, uint32(uint16(pfd[0].Revents)))
	}
	events, err := connWait.wait(ctx, fd)
	if err != nil {
		return err
	}
	return connectResult(fd, events)
}

// connectResult reads a connect that is over from fd's poll events.
// POLLERR is set while the socket holds an error: without it, POLLOUT is
// a connection and SO_ERROR need not be read (a soft error an ICMP left
// during the handshake is no failure once the handshake completed).
func connectResult(fd int, events uint32) error {
	if events&unix.EPOLLERR == 0 && events&unix.EPOLLOUT != 0 {
		return nil
	}
	soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return err
	}
	if soErr != 0 {
		return unix.Errno(soErr)
	}
	if events&unix.EPOLLOUT != 0 {
		return nil
	}
	return unix.ENOTCONN
}

// tcpSockaddr is addr as connect takes it. An IPv4-mapped address is
// reached over IPv4, as the net package does.
func tcpSockaddr(addr netip.AddrPort) (int, unix.Sockaddr, error) {
	a := addr.Addr()
	port := int(addr.Port())
	switch {
	case a.Is4() || a.Is4In6():
		return unix.AF_INET, &unix.SockaddrInet4{Port: port, Addr: a.Unmap().As4()}, nil
	case a.Is6():
		return unix.AF_INET6, &unix.SockaddrInet6{Port: port, Addr: a.As16(), ZoneId: zoneIndex(a.Zone())}, nil
	}
	return 0, nil, errors.New("no address")
}

// bindSockaddr is src as a local address of a socket of family, port 0.
func bindSockaddr(family int, src netip.Addr) (unix.Sockaddr, error) {
	if family == unix.AF_INET6 {
		return &unix.SockaddrInet6{Addr: src.As16(), ZoneId: zoneIndex(src.Zone())}, nil
	}
	if src = src.Unmap(); !src.Is4() {
		return nil, &net.AddrError{Err: "non-IPv4 address", Addr: src.String()}
	}
	return &unix.SockaddrInet4{Addr: src.As4()}, nil
}

// zoneIndex is the interface index of an IPv6 zone, a name or a number;
// 0 when there is none or it names no interface, as in the net package.
func zoneIndex(zone string) uint32 {
	if zone == "" {
		return 0
	}
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n)
	}
	if ifi, err := net.InterfaceByName(zone); err == nil {
		return uint32(ifi.Index)
	}
	return 0
}
