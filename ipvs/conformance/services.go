package conformance

// Cases for virtual services: every kind, keys, edits, deletes and errors.

import (
	"errors"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"golang.org/x/sys/unix"
)

func testAddServices(t *testing.T, c ipvs.Client) {
	all := []ipvs.Service{
		svc(ipvs.ProtoTCP, "10.0.0.1", 80),
		svc(ipvs.ProtoUDP, "10.0.0.1", 53),
		svc(ipvs.ProtoSCTP, "10.0.0.1", 5060),
		svc(ipvs.ProtoTCP, "2001:db8::1", 443),
		svc(ipvs.ProtoUDP, "2001:db8::1", 53),
		svc(ipvs.ProtoSCTP, "2001:db8::2", 36412),
		svc(ipvs.ProtoTCP, "10.0.0.2", 0), // port 0 catches every port
		fwm(ipvs.AFInet, 1),
		fwm(ipvs.AFInet, 4294967295),
		fwm(ipvs.AFInet6, 2),
		// Persistence with a netmask, in both families.
		with(svc(ipvs.ProtoTCP, "10.0.0.3", 443), func(s *ipvs.Service) {
			s.Flags, s.Timeout, s.Netmask = ipvs.FlagPersistent, 360, 0xffffff00
		}),
		with(svc(ipvs.ProtoTCP, "2001:db8::3", 443), func(s *ipvs.Service) {
			s.Flags, s.Timeout, s.Netmask = ipvs.FlagPersistent, 1800, 64
		}),
		with(fwm(ipvs.AFInet, 3), func(s *ipvs.Service) {
			s.Flags, s.Timeout, s.Netmask = ipvs.FlagPersistent, 60, 0xffff0000
		}),
		// A persistence engine.
		with(svc(ipvs.ProtoUDP, "10.0.0.4", 5060), func(s *ipvs.Service) {
			s.Flags, s.Timeout, s.PEName = ipvs.FlagPersistent, 360, "sip"
		}),
		// One-packet scheduling and scheduler flags.
		with(svc(ipvs.ProtoUDP, "10.0.0.5", 53), func(s *ipvs.Service) { s.Flags = ipvs.FlagOnePacket }),
		with(svc(ipvs.ProtoTCP, "10.0.0.6", 80), func(s *ipvs.Service) {
			s.Scheduler, s.Flags = "sh", ipvs.FlagSched1|ipvs.FlagSched2
		}),
		with(svc(ipvs.ProtoTCP, "10.0.0.7", 80), func(s *ipvs.Service) {
			s.Scheduler, s.Flags = "mh", ipvs.FlagSched1|ipvs.FlagSched2|ipvs.FlagSched3
		}),
		// A service without a scheduler.
		with(svc(ipvs.ProtoTCP, "10.0.0.8", 80), func(s *ipvs.Service) { s.Scheduler = "none" }),
		// The hashed flag is the kernel's own: it is never reported.
		with(svc(ipvs.ProtoTCP, "10.0.0.9", 80), func(s *ipvs.Service) { s.Flags = ipvs.FlagHashed | ipvs.FlagOnePacket }),
		// IPv4 netmask 0 is a valid /0 persistence granularity.
		with(svc(ipvs.ProtoTCP, "10.0.0.10", 80), func(s *ipvs.Service) { s.Netmask = 0 }),
	}
	for i, sched := range []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh"} {
		all = append(all, with(svc(ipvs.ProtoTCP, "10.1.0.1", uint16(1000+i)), func(s *ipvs.Service) { s.Scheduler = sched }))
	}
	for _, s := range all {
		mustExec(t, c, addSvc(s))
	}
	want := make([]ipvs.Service, len(all))
	for i, s := range all {
		want[i] = stored(s)
		want[i].Flags &^= ipvs.FlagHashed
	}
	expectServices(t, c, want...)
	for _, s := range want {
		expectDests(t, c, s)
	}
}

func testServiceKeys(t *testing.T, c ipvs.Client) {
	a := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	sameAddrUDP := svc(ipvs.ProtoUDP, "10.0.0.1", 80)
	otherPort := svc(ipvs.ProtoTCP, "10.0.0.1", 81)
	f4 := fwm(ipvs.AFInet, 7)
	f6 := fwm(ipvs.AFInet6, 7)
	mustExec(t, c, addSvc(a), addSvc(sameAddrUDP), addSvc(otherPort), addSvc(f4), addSvc(f6))
	expectServices(t, c, a, sameAddrUDP, otherPort, f4, f6)

	// A fwmark service is found by family and mark alone: a protocol,
	// address or port in the request is not sent and does not matter.
	noisy := with(f4, func(s *ipvs.Service) { s.Protocol, s.Addr, s.Port = ipvs.ProtoUDP, addr("1.2.3.4"), 99 })
	got, err := c.Service(noisy)
	if err != nil || got.Service != f4 {
		t.Errorf("Service(fwmark 7 with extra fields): got %+v, %v; want %+v", got, err, f4)
	}
	// Only the identity selects; other fields of the key are ignored.
	key := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: addr("10.0.0.1"), Port: 80}
	if got, err := c.Service(key); err != nil || got.Service != a {
		t.Errorf("Service(bare key): got %+v, %v; want %+v", got, err, a)
	}
	mustExec(t, c, delSvc(f4))
	expectServices(t, c, a, sameAddrUDP, otherPort, f6)
}

func testEditService(t *testing.T, c ipvs.Client) {
	s := with(svc(ipvs.ProtoUDP, "10.0.0.1", 5060), func(s *ipvs.Service) {
		s.Scheduler, s.Flags, s.Timeout, s.Netmask, s.PEName = "rr", ipvs.FlagPersistent|ipvs.FlagOnePacket, 360, 0xffffff00, "sip"
	})
	mustExec(t, c, addSvc(s), addDst(s, dst("192.168.0.1", 5060)))

	// -E is a full replacement: omitted options return to their defaults.
	plain := svc(ipvs.ProtoUDP, "10.0.0.1", 5060)
	mustExec(t, c, setSvc(plain))
	expectServices(t, c, plain)
	// Destinations survive an edit.
	expectDests(t, c, plain, dst("192.168.0.1", 5060))

	changed := with(plain, func(s *ipvs.Service) {
		s.Scheduler, s.Flags, s.Timeout, s.Netmask = "sh", ipvs.FlagPersistent|ipvs.FlagSched2, 60, 0xffff0000
	})
	mustExec(t, c, setSvc(changed))
	expectServices(t, c, changed)

	f6 := with(fwm(ipvs.AFInet6, 9), func(s *ipvs.Service) { s.Scheduler = "lc" })
	mustExec(t, c, addSvc(f6))
	f6e := with(f6, func(s *ipvs.Service) {
		s.Scheduler, s.Flags, s.Timeout, s.Netmask = "none", ipvs.FlagPersistent, 10, 48
	})
	mustExec(t, c, setSvc(f6e))
	expectServices(t, c, changed, f6e)
}

func testDeleteService(t *testing.T, c ipvs.Client) {
	a := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	b := svc(ipvs.ProtoTCP, "2001:db8::1", 80)
	f := fwm(ipvs.AFInet, 5)
	mustExec(t, c, addSvc(a), addSvc(b), addSvc(f), addDst(a, dst("192.168.0.1", 80)))
	mustExec(t, c, delSvc(a))
	expectServices(t, c, b, f)
	expectDests(t, c, a) // gone with its service
	expectErrno(t, c, unix.ESRCH, delSvc(a))
	mustExec(t, c, delSvc(f), delSvc(b))
	expectServices(t, c)
	// A re-added service starts without destinations.
	mustExec(t, c, addSvc(a))
	expectDests(t, c, a)
}

func testServiceErrors(t *testing.T, c ipvs.Client) {
	a := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	mustExec(t, c, addSvc(a))

	expectErrno(t, c, unix.EEXIST, addSvc(a))
	expectErrno(t, c, unix.EEXIST, addSvc(with(a, func(s *ipvs.Service) { s.Scheduler = "rr" })))
	expectErrno(t, c, unix.ENOENT, addSvc(with(svc(ipvs.ProtoTCP, "10.0.0.2", 80), func(s *ipvs.Service) { s.Scheduler = "nosuch" })))
	expectErrno(t, c, unix.ENOENT, addSvc(with(svc(ipvs.ProtoTCP, "10.0.0.2", 80), func(s *ipvs.Service) { s.Scheduler = "" })))
	expectErrno(t, c, unix.ENOENT, addSvc(with(svc(ipvs.ProtoUDP, "10.0.0.2", 80), func(s *ipvs.Service) { s.PEName = "nosuch" })))
	expectErrno(t, c, unix.EINVAL, addSvc(with(svc(ipvs.ProtoTCP, "2001:db8::1", 80), func(s *ipvs.Service) { s.Netmask = 0 })))
	expectErrno(t, c, unix.EINVAL, addSvc(with(svc(ipvs.ProtoTCP, "2001:db8::1", 80), func(s *ipvs.Service) { s.Netmask = 129 })))
	expectErrno(t, c, unix.EINVAL, addSvc(with(fwm(ipvs.AFInet6, 1), func(s *ipvs.Service) { s.Netmask = 0xffffffff })))
	// Scheduler names longer than 15 characters fail the attribute policy.
	expectErrno(t, c, unix.EINVAL, addSvc(with(svc(ipvs.ProtoTCP, "10.0.0.3", 80), func(s *ipvs.Service) { s.Scheduler = "sixteen-chars-xx" })))
	expectErrno(t, c, unix.EAFNOSUPPORT, addSvc(with(a, func(s *ipvs.Service) { s.Family = 7 })))
	expectErrno(t, c, unix.EAFNOSUPPORT, addSvc(with(a, func(s *ipvs.Service) { s.Family = 0 })))
	expectErrno(t, c, unix.EINVAL, ipvs.Request{Cmd: ipvs.CmdNewService})

	missing := svc(ipvs.ProtoTCP, "10.9.9.9", 80)
	expectErrno(t, c, unix.ESRCH, setSvc(missing))
	expectErrno(t, c, unix.ESRCH, delSvc(missing))
	expectErrno(t, c, unix.ESRCH, req(ipvs.CmdZero, &missing, nil))
	expectErrno(t, c, unix.ESRCH, setSvc(fwm(ipvs.AFInet, 99)))
	expectErrno(t, c, unix.ESRCH, setSvc(with(a, func(s *ipvs.Service) { s.Protocol = ipvs.ProtoUDP })))
	expectErrno(t, c, unix.EINVAL, ipvs.Request{Cmd: ipvs.CmdDelService})
	if _, err := c.Service(missing); !errors.Is(err, unix.ESRCH) {
		t.Errorf("Service(missing): got %v, want ESRCH", err)
	}

	// Failed edits leave the service as it was.
	expectErrno(t, c, unix.ENOENT, setSvc(with(a, func(s *ipvs.Service) { s.Scheduler = "nosuch" })))
	expectErrno(t, c, unix.ENOENT, setSvc(with(a, func(s *ipvs.Service) { s.PEName = "nosuch" })))
	// The zero-address service of ipvsadm -Z -t 0.0.0.0:0 is an ordinary
	// (missing) service to the kernel.
	zeroAddr := svc(ipvs.ProtoTCP, "0.0.0.0", 0)
	expectErrno(t, c, unix.ESRCH, req(ipvs.CmdZero, &zeroAddr, nil))
	expectServices(t, c, a)
}

func testServiceErrorOrder(t *testing.T, c ipvs.Client) {
	a := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	six := svc(ipvs.ProtoTCP, "2001:db8::1", 80)
	mustExec(t, c, addSvc(a), addSvc(six))
	// An existing service is reported before its scheduler is looked up.
	expectErrno(t, c, unix.EEXIST, addSvc(with(a, func(s *ipvs.Service) { s.Scheduler = "nosuch" })))
	// The scheduler, then the persistence engine, then the IPv6 netmask.
	bad := with(svc(ipvs.ProtoUDP, "2001:db8::2", 80), func(s *ipvs.Service) { s.Scheduler, s.PEName, s.Netmask = "nosuch", "nosuch", 0 })
	expectErrno(t, c, unix.ENOENT, addSvc(bad))
	bad.Scheduler = "rr"
	expectErrno(t, c, unix.ENOENT, addSvc(bad))
	bad.PEName = ""
	expectErrno(t, c, unix.EINVAL, addSvc(bad))
	expectErrno(t, c, unix.ENOENT, setSvc(with(six, func(s *ipvs.Service) { s.Scheduler, s.Netmask = "nosuch", 0 })))
	expectErrno(t, c, unix.EINVAL, setSvc(with(six, func(s *ipvs.Service) { s.Netmask = 0 })))
	// A missing service is reported before a bad scheduler on edit.
	expectErrno(t, c, unix.ESRCH, setSvc(with(svc(ipvs.ProtoTCP, "10.9.9.9", 1), func(s *ipvs.Service) { s.Scheduler = "nosuch" })))
	// The family is checked before the service is looked up.
	expectErrno(t, c, unix.EAFNOSUPPORT, delSvc(with(a, func(s *ipvs.Service) { s.Family = 3 })))
	expectServices(t, c, a, six)
}
