package health

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// probePing sends one ICMP echo request to addr, with mark as SO_MARK (0:
// none), and passes when its reply comes back before ctx's deadline. An
// ICMP error about the request (an iptables REJECT's port unreachable)
// fails it at once.
//
// Its socket is an ICMP datagram socket (SOCK_DGRAM, IPPROTO_ICMP or
// IPPROTO_ICMPV6) when the process's group is within
// net.ipv4.ping_group_range, which governs IPv6 too: any user may ping
// then, and the kernel picks the echo identifier and hands the socket
// only the replies that carry it. Otherwise (the kernel's default range,
// "1 0", admits no group, root's included) it is a raw socket, which
// needs CAP_NET_RAW, as lvsctl run has as root. Connected to addr and
// filtered to echo replies (ICMP_FILTER, ICMP6_FILTER), a raw socket
// still gets the replies to every raw ping of addr on the host, so the
// reply must carry this probe's identifier too. With neither, the probe
// fails and says so.
//
// Each probe has a socket of its own, made and closed, as a udp probe
// does. Ping checks are few beside tcp checks: sharing one socket per
// family would need a reader and a table of probes in flight, for little
// gain.
func probePing(ctx context.Context, addr netip.Addr, mark uint32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	addr = addr.Unmap()
	prefix := "ping " + addr.String()
	v6 := addr.Is6()
	fd, raw, err := icmpSocket(v6)
	if err != nil {
		return failure(err, prefix)
	}
	if err := icmpSetup(fd, addr, raw, mark); err != nil {
		unix.Close(fd)
		return failure(err, prefix)
	}
	// A non-blocking descriptor: the File uses the runtime's poller, and
	// its deadlines work.
	f := os.NewFile(uintptr(fd), "icmp")
	defer f.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = f.SetDeadline(dl)
	}
	// A cancellation before the deadline ends the wait too.
	stop := context.AfterFunc(ctx, func() { _ = f.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	buf := bufPool.Get().(*[4096]byte)
	defer bufPool.Put(buf)
	e := newEcho(v6)
	if _, err := f.Write(e.request(buf[:0])); err != nil {
		return pingErr(prefix, err)
	}
	for {
		n, err := f.Read(buf[:])
		if err != nil {
			return pingErr(prefix, err)
		}
		if e.isReply(buf[:n], raw && !v6, raw) {
			return nil
		}
	}
}

// pingErr words a failed send or receive; a refused one is an ICMP port
// unreachable (iptables REJECT's default).
func pingErr(prefix string, err error) error {
	if errors.Is(err, unix.ECONNREFUSED) {
		return &probeError{prefix + ": port unreachable", err}
	}
	return failure(err, prefix)
}

// icmpSetup filters a raw socket to echo replies, sets the mark and
// connects fd to addr.
func icmpSetup(fd int, addr netip.Addr, raw bool, mark uint32) error {
	if raw {
		var err error
		if addr.Is6() {
			var f unix.ICMPv6Filter // a set bit blocks its type
			for i := range f.Data {
				f.Data[i] = ^uint32(0)
			}
			f.Data[icmp6EchoReply>>5] &^= 1 << (icmp6EchoReply & 31)
			err = unix.SetsockoptICMPv6Filter(fd, unix.IPPROTO_ICMPV6, unix.ICMPV6_FILTER, &f)
		} else {
			err = unix.SetsockoptInt(fd, unix.SOL_RAW, unix.ICMP_FILTER, ^(1 << icmpEchoReply))
		}
		if err != nil {
			return err
		}
	}
	if mark != 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, int(mark)); err != nil {
			return &markError{mark, err}
		}
	}
	if addr.Is6() {
		return unix.Connect(fd, &unix.SockaddrInet6{Addr: addr.As16(), ZoneId: zoneIndex(addr.Zone())})
	}
	return unix.Connect(fd, &unix.SockaddrInet4{Addr: addr.As4()})
}

// icmpRaw is set, per family (IPv4, IPv6), once a datagram socket was
// refused: the next probes go to a raw socket first.
var icmpRaw [2]atomic.Bool

// icmpSocketCall makes a non-blocking socket; tests replace it.
var icmpSocketCall = func(domain, typ, proto int) (int, error) {
	return unix.Socket(domain, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
}

// errNoICMP is a probe's failure when neither kind of ICMP socket is
// allowed.
var errNoICMP = errors.New("no ICMP socket: the process's groups are outside net.ipv4.ping_group_range (for a datagram socket) and it lacks CAP_NET_RAW (for a raw one)")

// icmpSocket makes an ICMP socket of the family, as probePing says: a
// datagram socket, else a raw one (raw true).
func icmpSocket(v6 bool) (fd int, raw bool, err error) {
	domain, proto, i := unix.AF_INET, unix.IPPROTO_ICMP, 0
	if v6 {
		domain, proto, i = unix.AF_INET6, unix.IPPROTO_ICMPV6, 1
	}
	denied := func(err error) bool { return err == unix.EACCES || err == unix.EPERM }
	skipped := icmpRaw[i].Load()
	if !skipped {
		fd, err := icmpSocketCall(domain, unix.SOCK_DGRAM, proto)
		if err == nil {
			return fd, false, nil
		}
		if !denied(err) {
			return -1, false, err
		}
		icmpRaw[i].Store(true)
	}
	fd, err = icmpSocketCall(domain, unix.SOCK_RAW, proto)
	if err == nil {
		return fd, true, nil
	}
	if !denied(err) {
		return -1, false, err
	}
	if skipped {
		// The range may have been widened since a datagram socket was
		// refused.
		if fd, err := icmpSocketCall(domain, unix.SOCK_DGRAM, proto); err == nil {
			icmpRaw[i].Store(false)
			return fd, false, nil
		}
	}
	return -1, false, errNoICMP
}
