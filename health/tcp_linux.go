package health

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// probeTCP connects to addr and resets the connection at once: a pass is
// a completed handshake. It is tcpStart, then a wait on connWait for a
// connect still under way, then tcpFinish.
func probeTCP(ctx context.Context, t *Target, addr netip.AddrPort) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s, done, err := tcpStart(addr, t.Mark, t.Through)
	if done {
		return err
	}
	events, err := connWait.wait(ctx, s.fd)
	if err != nil {
		sysClose(s.fd)
		return failure(err, "connect "+addr.String())
	}
	return tcpFinish(s, addr, events)
}

// probeSock is a TCP probe's socket.
type probeSock struct {
	fd    int
	spare *atomic.Int32 // where fd goes when its probe passed; nil: closed then
}

// spares keeps, for the next probe, a socket of each family (IPv4, IPv6)
// whose last probe passed: connect with AF_UNSPEC resets the connection
// and leaves the socket as new. A passing probe then costs connect, poll
// and that reset, with no socket made and freed: a third less kernel
// time than socket, connect, poll, setsockopt(SO_LINGER) and close. A
// socket with a mark or a source of its own is not kept. Each holds an
// fd plus 1; 0 is none.
var spares [2]atomic.Int32

// tcpStart begins a TCP probe of addr on a raw non-blocking socket, with
// mark (0: none) and, for a via-vip probe (through valid), bound to the
// source toward the real server it crosses, as dialer does. Most
// connects to a local or veth peer are over when connect returns, so the
// socket is polled once: when the probe is over, done is true and err
// its result. Otherwise the socket's connect is under way, for tcpFinish
// once its poll events tell its end; it never joins the runtime's
// poller.
func tcpStart(addr netip.AddrPort, mark uint32, through netip.Addr) (s probeSock, done bool, err error) {
	var src netip.Addr
	if mark != 0 && through.IsValid() {
		if src, err = sourceToward(through); err != nil {
			return s, true, failure(err, "route to "+through.String())
		}
	}
	family, sa, err := tcpSockaddr(addr)
	if err != nil {
		return s, true, failure(err, "connect "+addr.String())
	}
	s.fd = -1
	if mark == 0 && !src.IsValid() {
		s.spare = &spares[0]
		if family == unix.AF_INET6 {
			s.spare = &spares[1]
		}
		s.fd = int(s.spare.Swap(0)) - 1
	}
	if s.fd < 0 {
		if s.fd, err = sysSocket(family); err != nil {
			return s, true, failure(err, "connect "+addr.String())
		}
	}
	events, err := startConnect(s.fd, family, sa, mark, src)
	if err == nil && events == 0 {
		return s, false, nil
	}
	if err != nil {
		sysClose(s.fd)
		return s, true, failure(err, "connect "+addr.String())
	}
	return s, true, tcpFinish(s, addr, events)
}

// tcpFinish ends the probe of s, whose connect to addr is over as its
// poll events tell, with a reset; s is kept as a spare or closed.
func tcpFinish(s probeSock, addr netip.AddrPort, events uint32) error {
	if err := connectResult(s.fd, events); err != nil {
		sysClose(s.fd)
		return failure(err, "connect "+addr.String())
	}
	// A reset instead of a FIN leaves no TIME_WAIT socket on the director
	// for every probe.
	if s.spare != nil && sysDisconnect(s.fd) == nil {
		if !s.spare.CompareAndSwap(0, int32(s.fd)+1) {
			sysClose(s.fd) // another is kept
		}
		return nil
	}
	sysReset(s.fd)
	return nil
}

// startConnect sets fd's mark and source and starts its connect to sa. It
// returns the poll events of a connect that is over already, for
// connectResult, or 0 when it is under way.
func startConnect(fd, family int, sa unix.Sockaddr, mark uint32, src netip.Addr) (uint32, error) {
	if mark != 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, int(mark)); err != nil {
			return 0, &markError{mark, err}
		}
	}
	if src.IsValid() {
		local, err := bindSockaddr(family, src)
		if err != nil {
			return 0, err
		}
		if err := unix.Bind(fd, local); err != nil {
			return 0, err
		}
	}
	switch err := sysConnect(fd, sa); err {
	case nil:
		return unix.POLLOUT, nil
	case unix.EINPROGRESS, unix.EALREADY, unix.EINTR:
	default:
		return 0, err
	}
	// poll's and epoll's event bits are the same on Linux.
	return sysPoll(fd), nil
}

// The probe's own system calls are raw, outside the runtime's syscall
// bookkeeping: none of them blocks (the socket is non-blocking, the poll
// does not wait, a close sends a reset or nothing). Made back to back by
// the checker's scheduler for thousands of targets, the bookkeeping kept
// the runtime's monitor thread waking to take the processor back, which
// costs kernel time per probe (figures: decision 0014).

func sysSocket(family int) (int, error) {
	fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, uintptr(family), unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// sysConnect starts the connect of fd to sa, an IPv4 or IPv6 address.
func sysConnect(fd int, sa unix.Sockaddr) error {
	var e unix.Errno
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		raw := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.Addr}
		putPort(&raw.Port, a.Port)
		_, _, e = unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&raw)), unsafe.Sizeof(raw))
	case *unix.SockaddrInet6:
		raw := unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: a.Addr, Scope_id: a.ZoneId}
		putPort(&raw.Port, a.Port)
		_, _, e = unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&raw)), unsafe.Sizeof(raw))
	default:
		return unix.EAFNOSUPPORT
	}
	if e != 0 {
		return e
	}
	return nil
}

// putPort stores port in network byte order.
func putPort(dst *uint16, port int) {
	b := (*[2]byte)(unsafe.Pointer(dst))
	b[0], b[1] = byte(port>>8), byte(port)
}

// sysPoll returns fd's poll events for POLLOUT now, without waiting; 0
// when there are none.
func sysPoll(fd int) uint32 {
	pfd := unix.PollFd{Fd: int32(fd), Events: unix.POLLOUT}
	var ts unix.Timespec
	n, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if e != 0 || n != 1 {
		return 0
	}
	return uint32(uint16(pfd.Revents))
}

// sysDisconnect resets fd's connection and leaves fd unconnected.
func sysDisconnect(fd int) error {
	var unspec unix.RawSockaddr // AF_UNSPEC
	_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&unspec)), unsafe.Sizeof(unspec))
	if e != 0 {
		return e
	}
	return nil
}

// sysReset closes fd, a connected socket, with a reset.
func sysReset(fd int) {
	l := unix.Linger{Onoff: 1}
	_, _, _ = unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_LINGER, uintptr(unsafe.Pointer(&l)), unsafe.Sizeof(l), 0)
	sysClose(fd)
}

func sysClose(fd int) { _, _, _ = unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0) }

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
