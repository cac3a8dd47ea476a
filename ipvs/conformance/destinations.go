package conformance

// Cases for destinations: methods, edits, deletes, errors, families, fwmarks.

import (
	"slices"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"golang.org/x/sys/unix"
)

func testDestinations(t *testing.T, c ipvs.Client) {
	s := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	mustExec(t, c, addSvc(s))
	ds := []ipvs.Destination{
		with(dst("192.168.0.1", 8080), func(d *ipvs.Destination) { d.FwdMethod = ipvs.FwdMasq }),
		with(dst("192.168.0.2", 80), func(d *ipvs.Destination) { d.Weight = 0 }),
		with(dst("192.168.0.3", 80), func(d *ipvs.Destination) { d.FwdMethod, d.Weight = ipvs.FwdTunnel, 2147483647 }),
		with(dst("192.168.0.4", 80), func(d *ipvs.Destination) { d.UThreshold, d.LThreshold = 100, 10 }),
		with(dst("192.168.0.5", 80), func(d *ipvs.Destination) { d.UThreshold = 5 }),
		with(dst("192.168.0.6", 80), func(d *ipvs.Destination) {
			d.FwdMethod, d.TunType, d.TunPort, d.TunFlags = ipvs.FwdTunnel, ipvs.TunGUE, 6080, ipvs.TunFlagCsum
		}),
		with(dst("192.168.0.7", 80), func(d *ipvs.Destination) {
			d.FwdMethod, d.TunType, d.TunPort, d.TunFlags = ipvs.FwdTunnel, ipvs.TunGUE, 6081, ipvs.TunFlagRemCsum
		}),
		with(dst("192.168.0.8", 80), func(d *ipvs.Destination) {
			d.FwdMethod, d.TunType, d.TunFlags = ipvs.FwdTunnel, ipvs.TunGRE, ipvs.TunFlagCsum
		}),
		with(dst("192.168.0.9", 80), func(d *ipvs.Destination) {
			d.FwdMethod, d.TunType, d.TunFlags = ipvs.FwdTunnel, ipvs.TunGRE, ipvs.TunFlagNoCsum
		}),
		with(dst("192.168.0.10", 80), func(d *ipvs.Destination) { d.FwdMethod, d.TunType = ipvs.FwdTunnel, ipvs.TunIPIP }),
		// Local addresses are fine destinations too, and so are the rest
		// of 0.0.0.0/8 and the reserved 240.0.0.0/4.
		with(dst("127.0.0.1", 80), func(d *ipvs.Destination) { d.FwdMethod = ipvs.FwdMasq }),
		dst("127.0.0.0", 80),
		dst("0.1.2.3", 80),
		dst("240.0.0.1", 80),
		// Same address, other port: another destination.
		with(dst("192.168.0.1", 8081), func(d *ipvs.Destination) { d.FwdMethod = ipvs.FwdMasq }),
	}
	for _, d := range ds {
		mustExec(t, c, addDst(s, d))
	}
	// The kernel lists the most recently added destination first.
	want := slices.Clone(ds)
	slices.Reverse(want)
	expectDests(t, c, s, want...)

	s6 := svc(ipvs.ProtoUDP, "2001:db8::1", 53)
	mustExec(t, c, addSvc(s6))
	d6 := []ipvs.Destination{
		dst("2001:db8:1::1", 53),
		with(dst("2001:db8:1::2", 53), func(d *ipvs.Destination) { d.FwdMethod, d.Weight = ipvs.FwdMasq, 100 }),
		with(dst("::1", 53), func(d *ipvs.Destination) { d.FwdMethod = ipvs.FwdTunnel }),
	}
	for _, d := range d6 {
		mustExec(t, c, addDst(s6, d))
	}
	slices.Reverse(d6)
	expectDests(t, c, s6, d6...)
	expectDests(t, c, s, want...) // untouched by the other service
}

func testEditDest(t *testing.T, c ipvs.Client) {
	s := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	a, b, d := dst("192.168.0.1", 80), dst("192.168.0.2", 80), dst("192.168.0.3", 80)
	mustExec(t, c, addSvc(s), addDst(s, a), addDst(s, b), addDst(s, d))
	// -e is a full replacement too; the destination keeps its place.
	b2 := with(b, func(d *ipvs.Destination) {
		d.FwdMethod, d.Weight, d.UThreshold, d.LThreshold = ipvs.FwdTunnel, 0, 50, 40
		d.TunType, d.TunPort, d.TunFlags = ipvs.TunGUE, 5555, ipvs.TunFlagRemCsum
	})
	mustExec(t, c, setDst(s, b2))
	expectDests(t, c, s, d, b2, a)
	b3 := with(b, func(d *ipvs.Destination) { d.FwdMethod, d.Weight = ipvs.FwdMasq, 7 })
	mustExec(t, c, setDst(s, b3))
	expectDests(t, c, s, d, b3, a)
	// A destination's family defaults to the service's.
	a2 := with(a, func(d *ipvs.Destination) { d.Family, d.Weight = 0, 3 })
	mustExec(t, c, setDst(s, a2))
	expectDests(t, c, s, d, b3, with(a, func(d *ipvs.Destination) { d.Weight = 3 }))
}

func testDeleteDest(t *testing.T, c ipvs.Client) {
	s := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	a, b, d := dst("192.168.0.1", 80), dst("192.168.0.2", 80), dst("192.168.0.3", 80)
	mustExec(t, c, addSvc(s), addDst(s, a), addDst(s, b), addDst(s, d))
	// A delete reads only the address and port.
	mustExec(t, c, delDst(s, with(b, func(d *ipvs.Destination) { d.Weight, d.FwdMethod, d.LThreshold = 99, ipvs.FwdMasq, 5 })))
	expectDests(t, c, s, d, a)
	expectErrno(t, c, unix.ENOENT, delDst(s, b))
	// Re-adding puts it first again.
	mustExec(t, c, addDst(s, b))
	expectDests(t, c, s, b, d, a)
	mustExec(t, c, delDst(s, a), delDst(s, b), delDst(s, d))
	expectDests(t, c, s)
}

func testDestErrors(t *testing.T, c ipvs.Client) {
	s := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	a := dst("192.168.0.1", 80)
	mustExec(t, c, addSvc(s), addDst(s, a))
	missing := svc(ipvs.ProtoTCP, "10.9.9.9", 80)

	expectErrno(t, c, unix.ESRCH, addDst(missing, a))
	expectErrno(t, c, unix.ESRCH, setDst(missing, a))
	expectErrno(t, c, unix.ESRCH, delDst(missing, a))
	expectErrno(t, c, unix.ESRCH, addDst(fwm(ipvs.AFInet, 1), a))
	expectErrno(t, c, unix.EEXIST, addDst(s, a))
	expectErrno(t, c, unix.EEXIST, addDst(s, with(a, func(d *ipvs.Destination) { d.Weight, d.FwdMethod = 5, ipvs.FwdMasq })))
	expectErrno(t, c, unix.ENOENT, setDst(s, dst("192.168.0.2", 80)))
	expectErrno(t, c, unix.ENOENT, setDst(s, dst("192.168.0.1", 81)))
	expectErrno(t, c, unix.ENOENT, delDst(s, dst("192.168.0.2", 80)))
	for _, bad := range []string{"0.0.0.0", "224.0.0.1", "239.255.255.250", "255.255.255.255", "127.255.255.255"} {
		expectErrno(t, c, unix.EINVAL, addDst(s, dst(bad, 80)))
	}
	s6 := svc(ipvs.ProtoTCP, "2001:db8::1", 80)
	mustExec(t, c, addSvc(s6))
	for _, bad := range []string{"::", "ff02::1", "fe80::1", "::ffff:10.1.1.1"} {
		expectErrno(t, c, unix.EINVAL, addDst(s6, dst(bad, 80)))
	}
	expectErrno(t, c, unix.ERANGE, addDst(s, with(dst("192.168.0.3", 80), func(d *ipvs.Destination) { d.UThreshold, d.LThreshold = 10, 11 })))
	expectErrno(t, c, unix.ERANGE, addDst(s, with(dst("192.168.0.3", 80), func(d *ipvs.Destination) { d.LThreshold = 7 })))
	expectErrno(t, c, unix.ERANGE, setDst(s, with(a, func(d *ipvs.Destination) { d.LThreshold = 7 })))
	expectErrno(t, c, unix.ERANGE, addDst(s, with(dst("192.168.0.3", 80), func(d *ipvs.Destination) { d.Weight = 2147483648 })))
	expectErrno(t, c, unix.ERANGE, setDst(s, with(a, func(d *ipvs.Destination) { d.Weight = 4294967295 })))
	expectErrno(t, c, unix.EINVAL, addDst(s, with(dst("192.168.0.3", 80), func(d *ipvs.Destination) {
		d.FwdMethod, d.TunType, d.TunPort = ipvs.FwdTunnel, ipvs.TunGUE, 0
	})))
	expectErrno(t, c, unix.EINVAL, setDst(s, with(a, func(d *ipvs.Destination) { d.TunType, d.TunPort = ipvs.TunGUE, 0 })))
	expectErrno(t, c, unix.EAFNOSUPPORT, addDst(s, with(dst("192.168.0.3", 80), func(d *ipvs.Destination) { d.Family = 7 })))
	expectErrno(t, c, unix.EINVAL, req(ipvs.CmdNewDest, &s, nil))
	expectErrno(t, c, unix.EINVAL, req(ipvs.CmdDelDest, &s, nil))
	expectErrno(t, c, unix.EINVAL, req(ipvs.CmdNewDest, nil, &a))
	// Nothing above changed the table.
	expectDests(t, c, s, a)
	expectDests(t, c, s6)
}

func testDestErrorOrder(t *testing.T, c ipvs.Client) {
	s := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	a := dst("192.168.0.1", 80)
	mustExec(t, c, addSvc(s), addDst(s, a))
	missing := svc(ipvs.ProtoTCP, "10.9.9.9", 80)
	// The service is checked before the destination is even parsed.
	expectErrno(t, c, unix.ESRCH, req(ipvs.CmdNewDest, &missing, nil))
	expectErrno(t, c, unix.ESRCH, addDst(missing, with(a, func(d *ipvs.Destination) { d.Family = 7 })))
	// Ranges before the tunnel port before existence before the address.
	both := with(a, func(d *ipvs.Destination) { d.LThreshold, d.TunType, d.TunPort = 5, ipvs.TunGUE, 0 })
	expectErrno(t, c, unix.ERANGE, addDst(s, both))
	both.LThreshold = 0
	expectErrno(t, c, unix.EINVAL, addDst(s, both))
	expectErrno(t, c, unix.EEXIST, addDst(s, a))
	expectErrno(t, c, unix.ERANGE, setDst(s, with(dst("192.168.0.9", 80), func(d *ipvs.Destination) { d.LThreshold = 1 })))
	// Weight before thresholds (both ERANGE) and before existence.
	expectErrno(t, c, unix.ERANGE, addDst(s, with(a, func(d *ipvs.Destination) { d.Weight = 1 << 31 })))
	// A mixed family is refused for the forwarding method before anything
	// about the destination itself.
	expectErrno(t, c, unix.EINVAL, addDst(s, with(dst("2001:db8::9", 80), func(d *ipvs.Destination) { d.LThreshold = 5 })))
	expectDests(t, c, s, a)
}

func testMixedFamily(t *testing.T, c ipvs.Client) {
	s := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	mustExec(t, c, addSvc(s))
	six := with(dst("2001:db8::10", 80), func(d *ipvs.Destination) { d.FwdMethod = ipvs.FwdTunnel })
	gue := with(dst("2001:db8::11", 80), func(d *ipvs.Destination) {
		d.FwdMethod, d.TunType, d.TunPort = ipvs.FwdTunnel, ipvs.TunGUE, 6080
	})
	mustExec(t, c, addDst(s, six), addDst(s, gue), addDst(s, dst("192.168.0.1", 80)))
	expectDests(t, c, s, dst("192.168.0.1", 80), gue, six)
	// Only tunnelling can reach another family.
	expectErrno(t, c, unix.EINVAL, addDst(s, dst("2001:db8::12", 80)))
	expectErrno(t, c, unix.EINVAL, addDst(s, with(dst("2001:db8::12", 80), func(d *ipvs.Destination) { d.FwdMethod = ipvs.FwdMasq })))
	expectErrno(t, c, unix.EINVAL, setDst(s, with(six, func(d *ipvs.Destination) { d.FwdMethod = ipvs.FwdRoute })))
	// Destinations are told apart by family: the IPv4 reading of the same
	// bytes is another destination.
	expectErrno(t, c, unix.ENOENT, delDst(s, ipvs.Destination{Family: ipvs.AFInet, Addr: addr("32.1.13.184"), Port: 80}))
	mustExec(t, c, delDst(s, six))
	expectDests(t, c, s, dst("192.168.0.1", 80), gue)

	s6 := svc(ipvs.ProtoUDP, "2001:db8::1", 53)
	four := with(dst("192.168.1.1", 53), func(d *ipvs.Destination) { d.FwdMethod, d.TunType = ipvs.FwdTunnel, ipvs.TunGRE })
	mustExec(t, c, addSvc(s6), addDst(s6, four))
	expectDests(t, c, s6, four)
}

func testFwmarkDests(t *testing.T, c ipvs.Client) {
	f4 := fwm(ipvs.AFInet, 1)
	f6 := fwm(ipvs.AFInet6, 1)
	mustExec(t, c, addSvc(f4), addSvc(f6))
	a := dst("192.168.0.1", 0)
	b := with(dst("192.168.0.2", 8080), func(d *ipvs.Destination) { d.FwdMethod = ipvs.FwdMasq })
	x := dst("2001:db8::20", 0)
	mustExec(t, c, addDst(f4, a), addDst(f4, b), addDst(f6, x))
	expectDests(t, c, f4, b, a)
	expectDests(t, c, f6, x)
	// The lookup ignores protocol, address and port of a fwmark key.
	expectDests(t, c, with(f4, func(s *ipvs.Service) { s.Protocol, s.Addr, s.Port = ipvs.ProtoUDP, addr("9.9.9.9"), 1 }), b, a)
	mustExec(t, c, delDst(with(f6, func(s *ipvs.Service) { s.Scheduler = "" }), x))
	expectDests(t, c, f6)
}
