// Package conformance is the one suite of IPVS behaviours that every
// ipvs.Client must show: the in-memory fake (package ipvs/ipvstest, on the
// host) and the netlink client against the real kernel (in the lab). Each
// case asserts exact stored values and exact errnos, so passing on both
// proves the fake answers like the kernel for everything the suite covers.
//
// The kernel lists services in hash order, which mixes in a kernel pointer
// and so cannot be reproduced; services are compared as a set. Destinations
// are listed most recently added first by both and are compared in order.
package conformance

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"golang.org/x/sys/unix"
)

// Run runs every case as a subtest. open must return a client for an empty
// IPVS (a fresh network namespace in the kernel) with "lo" up and no other
// interface; it is called once per case, from the case's own goroutine, and
// owns the client's cleanup (Run does not close it).
func Run(t *testing.T, open func(t *testing.T) ipvs.Client) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, open(t))
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, c ipvs.Client)
}

var cases = []testCase{
	{"Info", testInfo},
	{"EmptyTables", testEmpty},
	{"AddServicesOfEveryKind", testAddServices},
	{"ServiceKeys", testServiceKeys},
	{"EditServiceReplacesEverything", testEditService},
	{"DeleteService", testDeleteService},
	{"ServiceErrors", testServiceErrors},
	{"ServiceErrorOrder", testServiceErrorOrder},
	{"DestinationsEveryMethod", testDestinations},
	{"EditDestinationKeepsPosition", testEditDest},
	{"DeleteDestination", testDeleteDest},
	{"DestinationErrors", testDestErrors},
	{"DestinationErrorOrder", testDestErrorOrder},
	{"MixedFamilyTunnel", testMixedFamily},
	{"FwmarkDestinations", testFwmarkDests},
	{"Zero", testZero},
	{"Flush", testFlush},
	{"Timeouts", testTimeouts},
	{"DaemonsStartStopList", testDaemons},
	{"DaemonOptions", testDaemonOptions},
	{"DaemonErrors", testDaemonErrors},
	{"DaemonsAndMixedFamilies", testDaemonMixed},
	{"ExecRejectsReads", testExecRejectsReads},
	{"PipelineAnswersInOrder", testPipeline},
	{"LargeDumps", testLargeDumps},
}

// ---- values ----------------------------------------------------------------

var (
	v4mask   uint32 = 0xffffffff
	v6prefix uint32 = 128
)

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// svc builds an address service as ipvsadm -A sends it by default
// (scheduler wlc, no flags, full netmask).
func svc(proto ipvs.Protocol, a string, port uint16) ipvs.Service {
	ip := addr(a)
	s := ipvs.Service{Family: ipvs.AFInet, Protocol: proto, Addr: ip, Port: port, Scheduler: "wlc", Netmask: v4mask}
	if ip.Is6() {
		s.Family, s.Netmask = ipvs.AFInet6, v6prefix
	}
	return s
}

func fwm(family ipvs.Family, mark uint32) ipvs.Service {
	s := ipvs.Service{Family: family, FWMark: mark, Scheduler: "wlc", Netmask: v4mask}
	if family == ipvs.AFInet6 {
		s.Netmask = v6prefix
	}
	return s
}

// dst builds a destination as ipvsadm -a sends it by default (route,
// weight 1).
func dst(a string, port uint16) ipvs.Destination {
	ip := addr(a)
	d := ipvs.Destination{Family: ipvs.AFInet, Addr: ip, Port: port, FwdMethod: ipvs.FwdRoute, Weight: 1}
	if ip.Is6() {
		d.Family = ipvs.AFInet6
	}
	return d
}

func with[T any](v T, f func(*T)) T {
	f(&v)
	return v
}

func req(cmd ipvs.Op, s *ipvs.Service, d *ipvs.Destination) ipvs.Request {
	return ipvs.Request{Cmd: cmd, Service: s, Dest: d}
}

func addSvc(s ipvs.Service) ipvs.Request { return req(ipvs.CmdNewService, &s, nil) }
func setSvc(s ipvs.Service) ipvs.Request { return req(ipvs.CmdSetService, &s, nil) }
func delSvc(s ipvs.Service) ipvs.Request { return req(ipvs.CmdDelService, &s, nil) }
func addDst(s ipvs.Service, d ipvs.Destination) ipvs.Request {
	return req(ipvs.CmdNewDest, &s, &d)
}
func setDst(s ipvs.Service, d ipvs.Destination) ipvs.Request {
	return req(ipvs.CmdSetDest, &s, &d)
}
func delDst(s ipvs.Service, d ipvs.Destination) ipvs.Request {
	return req(ipvs.CmdDelDest, &s, &d)
}

// stored is what the kernel reports for a service it was sent: a fwmark
// service has no protocol, address or port.
func stored(s ipvs.Service) ipvs.Service {
	if s.FWMark != 0 {
		s.Protocol, s.Addr, s.Port = 0, netip.Addr{}, 0
	}
	return s
}

// ---- assertions ------------------------------------------------------------

func mustExec(t *testing.T, c ipvs.Client, reqs ...ipvs.Request) {
	t.Helper()
	for _, r := range reqs {
		if err := c.Exec(r); err != nil {
			t.Fatalf("Exec %s: %v\nrequest: %s", r.Cmd, err, show(r))
		}
	}
}

func expectErrno(t *testing.T, c ipvs.Client, want unix.Errno, r ipvs.Request) {
	t.Helper()
	err := c.Exec(r)
	if !errors.Is(err, want) {
		t.Errorf("Exec %s: got %v, want %s (%d)\nrequest: %s", r.Cmd, err, unix.ErrnoName(want), int(want), show(r))
	}
	var op *ipvs.OpError
	if err != nil && !errors.As(err, &op) {
		t.Errorf("Exec %s: error %v is not an *ipvs.OpError", r.Cmd, err)
	}
}

func show(r ipvs.Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", r.Cmd)
	if r.Service != nil {
		fmt.Fprintf(&b, " service=%+v", *r.Service)
	}
	if r.Dest != nil {
		fmt.Fprintf(&b, " dest=%+v", *r.Dest)
	}
	if r.Daemon != nil {
		fmt.Fprintf(&b, " daemon=%+v", *r.Daemon)
	}
	if r.Timeouts != nil {
		fmt.Fprintf(&b, " timeouts=%+v", *r.Timeouts)
	}
	return b.String()
}

func serviceKey(s ipvs.Service) string {
	return fmt.Sprintf("%d/%d/%d/%s/%d", s.Family, s.FWMark, s.Protocol, s.Addr, s.Port)
}

// expectServices compares the service list with want as a set.
func expectServices(t *testing.T, c ipvs.Client, want ...ipvs.Service) {
	t.Helper()
	got, err := c.Services()
	if err != nil {
		t.Fatalf("Services: %v", err)
	}
	sortServices := func(l []ipvs.ServiceEntry) []ipvs.ServiceEntry {
		l = slices.Clone(l)
		slices.SortFunc(l, func(a, b ipvs.ServiceEntry) int { return strings.Compare(serviceKey(a.Service), serviceKey(b.Service)) })
		return l
	}
	// Nothing carries traffic here: every counter is zero.
	wantEntries := make([]ipvs.ServiceEntry, len(want))
	for i := range want {
		wantEntries[i].Service = want[i]
	}
	g, w := sortServices(got), sortServices(wantEntries)
	if !slices.Equal(g, w) {
		t.Errorf("Services (as a set):\n got  %s\n want %s", list(g), list(w))
	}
	// The dump without allocations hands out the same services in the
	// same order.
	var dumped []ipvs.ServiceEntry
	if err := ipvs.DumpServices(c, func(s *ipvs.ServiceEntry) error { dumped = append(dumped, *s); return nil }); err != nil {
		t.Fatalf("DumpServices: %v", err)
	}
	if !slices.Equal(dumped, got) {
		t.Errorf("DumpServices differs from Services:\n got  %s\n want %s", list(dumped), list(got))
	}
	for _, s := range want {
		one, err := c.Service(s)
		if err != nil {
			t.Errorf("Service(%s): %v", serviceKey(s), err)
		} else if one != (ipvs.ServiceEntry{Service: s}) {
			t.Errorf("Service(%s):\n got  %+v\n want %+v", serviceKey(s), one, s)
		}
	}
}

// expectDests compares a service's destinations with want, in order.
func expectDests(t *testing.T, c ipvs.Client, s ipvs.Service, want ...ipvs.Destination) {
	t.Helper()
	got, err := c.Destinations(s)
	if err != nil {
		t.Fatalf("Destinations(%s): %v", serviceKey(s), err)
	}
	// Appending keeps what the slice held and adds the same list.
	prefix := []ipvs.DestinationEntry{{Destination: dst("192.0.2.99", 9)}}
	appended, err := ipvs.AppendDestinations(c, prefix, &s)
	if err != nil {
		t.Fatalf("AppendDestinations(%s): %v", serviceKey(s), err)
	}
	if !slices.Equal(appended[:1], prefix) || !slices.Equal(appended[1:], got) {
		t.Errorf("AppendDestinations(%s) = %s, want %s after %s", serviceKey(s), list(appended), list(got), list(prefix))
	}
	if len(got) == 0 && len(want) == 0 {
		return
	}
	wantEntries := make([]ipvs.DestinationEntry, len(want))
	for i := range want {
		wantEntries[i].Destination = want[i] // no traffic: counters zero
	}
	if !slices.Equal(got, wantEntries) {
		t.Errorf("Destinations(%s) in order:\n got  %s\n want %s", serviceKey(s), list(got), list(want))
	}
}

func list[T any](l []T) string {
	if len(l) == 0 {
		return "[]"
	}
	var b strings.Builder
	for _, v := range l {
		fmt.Fprintf(&b, "\n   %+v", v)
	}
	return b.String()
}

func expectTimeouts(t *testing.T, c ipvs.Client, want ipvs.Timeouts) {
	t.Helper()
	got, err := c.Timeouts()
	if err != nil {
		t.Fatalf("Timeouts: %v", err)
	}
	if got != want {
		t.Errorf("Timeouts: got %+v, want %+v", got, want)
	}
}

func expectDaemons(t *testing.T, c ipvs.Client, want ...ipvs.Daemon) {
	t.Helper()
	got, err := c.Daemons()
	if err != nil {
		t.Fatalf("Daemons: %v", err)
	}
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Errorf("Daemons:\n got  %s\n want %s", list(got), list(want))
	}
}

// ---- cases -----------------------------------------------------------------

func testInfo(t *testing.T, c ipvs.Client) {
	info, err := c.Info()
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	want := ipvs.Info{Version: 0x010201, ConnTabSize: 4096}
	if info != want {
		t.Errorf("Info: got %+v, want %+v", info, want)
	}
}

func testEmpty(t *testing.T, c ipvs.Client) {
	expectServices(t, c)
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 900, TCPFin: 120, UDP: 300})
	expectDaemons(t, c)
	if _, err := c.Service(svc(ipvs.ProtoTCP, "10.0.0.1", 80)); !errors.Is(err, unix.ESRCH) {
		t.Errorf("Service of an empty table: got %v, want ESRCH", err)
	}
	// A dump for a missing service ends without an error.
	expectDests(t, c, svc(ipvs.ProtoTCP, "10.0.0.1", 80))
}

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

func testZero(t *testing.T, c ipvs.Client) {
	s := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	f := fwm(ipvs.AFInet6, 3)
	mustExec(t, c, addSvc(s), addSvc(f), addDst(s, dst("192.168.0.1", 80)))
	mustExec(t, c, req(ipvs.CmdZero, &s, nil), req(ipvs.CmdZero, &f, nil), req(ipvs.CmdZero, nil, nil))
	// ipvsadm sends its whole service for -Z; only the identity counts.
	mustExec(t, c, req(ipvs.CmdZero, &ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: addr("10.0.0.1"), Port: 80}, nil))
	expectErrno(t, c, unix.ESRCH, req(ipvs.CmdZero, &ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoUDP, Addr: addr("10.0.0.1"), Port: 80}, nil))
	// Counters are zero (no traffic in a fresh namespace) and stay so.
	expectServices(t, c, s, f)
	expectDests(t, c, s, dst("192.168.0.1", 80))
	// Zeroing all on an empty table is fine.
	mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdFlush}, ipvs.Request{Cmd: ipvs.CmdZero})
}

func testFlush(t *testing.T, c ipvs.Client) {
	mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdFlush})
	s := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	f := fwm(ipvs.AFInet, 2)
	six := svc(ipvs.ProtoUDP, "2001:db8::1", 53)
	mustExec(t, c, addSvc(s), addSvc(f), addSvc(six), addDst(s, dst("192.168.0.1", 80)),
		addDst(six, with(dst("192.168.0.1", 53), func(d *ipvs.Destination) { d.FwdMethod = ipvs.FwdTunnel })))
	mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdFlush})
	expectServices(t, c)
	expectDests(t, c, s)
	// Flushing keeps timeouts; and the mixed-family destination went with
	// its service, so a sync daemon may start again.
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 900, TCPFin: 120, UDP: 300})
	mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdNewDaemon, Daemon: &ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo"}})
	mustExec(t, c, addSvc(s))
	expectServices(t, c, s)
	expectDests(t, c, s)
}

func testTimeouts(t *testing.T, c ipvs.Client) {
	set := func(tcp, fin, udp uint32) ipvs.Request {
		return ipvs.Request{Cmd: ipvs.CmdSetConfig, Timeouts: &ipvs.Timeouts{TCP: tcp, TCPFin: fin, UDP: udp}}
	}
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 900, TCPFin: 120, UDP: 300})
	mustExec(t, c, set(10, 0, 20))
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 10, TCPFin: 120, UDP: 20})
	mustExec(t, c, set(0, 0, 0))
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 10, TCPFin: 120, UDP: 20})
	mustExec(t, c, set(0, 1, 0))
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 10, TCPFin: 1, UDP: 20})
	// Each value must fit INT_MAX jiffies: 2147483647/250 = 8589934 s.
	mustExec(t, c, set(8589934, 8589934, 8589934))
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 8589934, TCPFin: 8589934, UDP: 8589934})
	expectErrno(t, c, unix.EINVAL, set(8589935, 0, 0))
	expectErrno(t, c, unix.EINVAL, set(5, 5, 4294967295))
	// A failed request changes nothing, not even its valid values.
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 8589934, TCPFin: 8589934, UDP: 8589934})
	mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdSetConfig})
	mustExec(t, c, set(900, 120, 300))
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 900, TCPFin: 120, UDP: 300})
}

var syncGroup = addr("224.0.0.81")

// mustStop stops a daemon. The kernel may stop a daemon whose thread has
// not run yet without answering (see ipvs.ErrNoAnswer); it is stopped all
// the same, which the callers check with Daemons.
func mustStop(t *testing.T, c ipvs.Client, d ipvs.Daemon) {
	t.Helper()
	err := c.Exec(daemonReq(ipvs.CmdDelDaemon, d))
	if err != nil && !(errors.Is(err, ipvs.ErrNoAnswer) && errors.Is(err, unix.EINTR)) {
		t.Fatalf("stop daemon %+v: %v", d, err)
	}
}

func daemonReq(cmd ipvs.Op, d ipvs.Daemon) ipvs.Request {
	return ipvs.Request{Cmd: cmd, Daemon: &d}
}

func testDaemons(t *testing.T, c ipvs.Client) {
	start := func(d ipvs.Daemon) ipvs.Request { return daemonReq(ipvs.CmdNewDaemon, d) }
	stop := func(state ipvs.DaemonState) ipvs.Request {
		return daemonReq(ipvs.CmdDelDaemon, ipvs.Daemon{State: state})
	}
	mustExec(t, c, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", SyncID: 5}))
	master := ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", SyncID: 5, MaxLen: 1472, Group: syncGroup, Port: 8848, TTL: 1}
	expectDaemons(t, c, master)
	expectErrno(t, c, unix.EEXIST, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", SyncID: 6}))

	// The backup buffer follows the interface MTU: lo's 65536 is capped at
	// 65535, less the IPv4 and UDP headers.
	mustExec(t, c, start(ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo", SyncID: 7}))
	backup := ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo", SyncID: 7, MaxLen: 65507, Group: syncGroup, Port: 8848, TTL: 1}
	expectDaemons(t, c, master, backup)
	expectErrno(t, c, unix.EEXIST, start(ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo"}))

	mustStop(t, c, ipvs.Daemon{State: ipvs.DaemonMaster})
	expectDaemons(t, c, backup)
	expectErrno(t, c, unix.ESRCH, stop(ipvs.DaemonMaster))
	// A stop request names only the state; ipvsadm sends an empty
	// interface and its sync id, which the kernel ignores.
	mustStop(t, c, ipvs.Daemon{State: ipvs.DaemonBackup, SyncID: 99})
	expectDaemons(t, c)
	expectErrno(t, c, unix.ESRCH, stop(ipvs.DaemonBackup))
	// Stopped daemons can start again.
	mustExec(t, c, start(ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo", SyncID: 8}))
	expectDaemons(t, c, with(backup, func(d *ipvs.Daemon) { d.SyncID = 8 }))
}

func testDaemonOptions(t *testing.T, c ipvs.Client) {
	start := func(d ipvs.Daemon) ipvs.Request { return daemonReq(ipvs.CmdNewDaemon, d) }
	stopAll := func() {
		mustStop(t, c, ipvs.Daemon{State: ipvs.DaemonMaster})
		mustStop(t, c, ipvs.Daemon{State: ipvs.DaemonBackup})
		expectDaemons(t, c)
	}
	mustExec(t, c,
		start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", SyncID: 255, MaxLen: 1000, Group: addr("239.1.2.3"), Port: 9000, TTL: 3}),
		start(ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo", SyncID: 1, MaxLen: 100}))
	expectDaemons(t, c,
		ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", SyncID: 255, MaxLen: 1000, Group: addr("239.1.2.3"), Port: 9000, TTL: 3},
		// A backup buffer is at least 1024 bytes.
		ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo", SyncID: 1, MaxLen: 1024, Group: syncGroup, Port: 8848, TTL: 1})
	stopAll()

	// (An IPv6 group cannot be tested here: lo has no IPv6 multicast
	// route, so the kernel answers ENETUNREACH.)
	mustExec(t, c, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", MaxLen: 65535}),
		start(ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo", MaxLen: 1}))
	expectDaemons(t, c,
		ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", MaxLen: 65507, Group: syncGroup, Port: 8848, TTL: 1},
		ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo", MaxLen: 1024, Group: syncGroup, Port: 8848, TTL: 1})
}

func testDaemonErrors(t *testing.T, c ipvs.Client) {
	start := func(d ipvs.Daemon) ipvs.Request { return daemonReq(ipvs.CmdNewDaemon, d) }
	expectErrno(t, c, unix.ENODEV, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "eth0"}))
	expectErrno(t, c, unix.ENODEV, start(ipvs.Daemon{State: ipvs.DaemonBackup, Interface: ""}))
	expectErrno(t, c, unix.EINVAL, start(ipvs.Daemon{State: 3, Interface: "lo"}))
	expectErrno(t, c, unix.EINVAL, start(ipvs.Daemon{State: 0, Interface: "lo"}))
	// The interface is looked up before the state is examined.
	expectErrno(t, c, unix.ENODEV, start(ipvs.Daemon{State: 3, Interface: "eth0"}))
	expectErrno(t, c, unix.EINVAL, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", Group: addr("10.0.0.1")}))
	expectErrno(t, c, unix.EINVAL, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", Group: addr("2001:db8::1")}))
	// The group is checked before the interface.
	expectErrno(t, c, unix.EINVAL, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "eth0", Group: addr("10.0.0.1")}))
	expectErrno(t, c, unix.EINVAL, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "sixteen-chars-xx"}))
	expectErrno(t, c, unix.EINVAL, ipvs.Request{Cmd: ipvs.CmdNewDaemon})
	expectErrno(t, c, unix.EINVAL, ipvs.Request{Cmd: ipvs.CmdDelDaemon})
	expectErrno(t, c, unix.ESRCH, daemonReq(ipvs.CmdDelDaemon, ipvs.Daemon{State: ipvs.DaemonMaster}))
	expectErrno(t, c, unix.ESRCH, daemonReq(ipvs.CmdDelDaemon, ipvs.Daemon{State: ipvs.DaemonBackup}))
	expectErrno(t, c, unix.EINVAL, daemonReq(ipvs.CmdDelDaemon, ipvs.Daemon{State: 3}))
	expectDaemons(t, c)
	// With a master running, an unknown interface is still reported first
	// (the interface is looked up before the running daemon is noticed),
	// and a refused start leaves the running daemon's settings alone.
	mustExec(t, c, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo"}))
	expectErrno(t, c, unix.ENODEV, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "eth0"}))
	expectErrno(t, c, unix.EEXIST, start(ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", SyncID: 3, MaxLen: 9000}))
	expectDaemons(t, c, ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo", MaxLen: 1472, Group: syncGroup, Port: 8848, TTL: 1})
}

func testDaemonMixed(t *testing.T, c ipvs.Client) {
	s := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	six := with(dst("2001:db8::10", 80), func(d *ipvs.Destination) { d.FwdMethod = ipvs.FwdTunnel })
	master := ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo"}
	mustExec(t, c, addSvc(s), addDst(s, six))
	// The sync protocol cannot carry mixed-family destinations.
	expectErrno(t, c, unix.EINVAL, daemonReq(ipvs.CmdNewDaemon, master))
	mustExec(t, c, delDst(s, six))
	mustExec(t, c, daemonReq(ipvs.CmdNewDaemon, master))
	expectErrno(t, c, unix.EINVAL, addDst(s, six))
	// Same-family destinations are fine, and deleting needs no check.
	mustExec(t, c, addDst(s, dst("192.168.0.1", 80)), delDst(s, dst("192.168.0.1", 80)))
	expectDests(t, c, s)
}

func testExecRejectsReads(t *testing.T, c ipvs.Client) {
	s := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	for _, cmd := range []ipvs.Op{ipvs.CmdGetService, ipvs.CmdGetDest, ipvs.CmdGetDaemon, ipvs.CmdGetConfig, ipvs.CmdGetInfo, 0, 200} {
		expectErrno(t, c, unix.EINVAL, req(cmd, &s, nil))
	}
	expectServices(t, c)
}

func testPipeline(t *testing.T, c ipvs.Client) {
	a := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	b := fwm(ipvs.AFInet6, 4)
	missing := svc(ipvs.ProtoUDP, "10.0.0.1", 80)
	type step struct {
		r    ipvs.Request
		want unix.Errno
	}
	steps := []step{
		{addSvc(a), 0},
		{addSvc(a), unix.EEXIST},
		{addSvc(b), 0},
		{addDst(missing, dst("192.168.0.1", 80)), unix.ESRCH},
		{addSvc(with(svc(ipvs.ProtoTCP, "10.0.0.2", 80), func(s *ipvs.Service) { s.Scheduler = "nosuch" })), unix.ENOENT},
	}
	var wantA, wantB []ipvs.Destination
	for i := range 40 {
		d := dst(fmt.Sprintf("192.168.1.%d", i+1), 80)
		steps = append(steps, step{addDst(a, d), 0})
		wantA = append([]ipvs.Destination{d}, wantA...)
		if i%7 == 3 {
			steps = append(steps, step{addDst(a, d), unix.EEXIST})
			steps = append(steps, step{addDst(a, dst("0.0.0.0", 80)), unix.EINVAL})
		}
		d6 := dst(fmt.Sprintf("2001:db8::%x", i+1), 0)
		steps = append(steps, step{addDst(b, d6), 0})
		wantB = append([]ipvs.Destination{d6}, wantB...)
	}
	steps = append(steps,
		step{delSvc(missing), unix.ESRCH},
		step{ipvs.Request{Cmd: ipvs.CmdSetConfig, Timeouts: &ipvs.Timeouts{TCP: 77}}, 0},
		step{ipvs.Request{Cmd: ipvs.CmdGetService}, unix.EINVAL}, // refused locally, still in order
		step{setDst(a, with(dst("192.168.1.1", 80), func(d *ipvs.Destination) { d.Weight = 9 })), 0},
		step{ipvs.Request{Cmd: ipvs.CmdSetConfig, Timeouts: &ipvs.Timeouts{UDP: 1 << 30}}, unix.EINVAL},
		step{daemonReq(ipvs.CmdDelDaemon, ipvs.Daemon{State: ipvs.DaemonMaster}), unix.ESRCH},
	)
	wantA[len(wantA)-1].Weight = 9

	for _, window := range []int{1, 3, 16} {
		t.Run(fmt.Sprintf("window%d", window), func(t *testing.T) {
			mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdFlush})
			p := c.Pipeline(window)
			var got []error
			for i, s := range steps {
				if err := p.Submit(s.r, func(err error) { got = append(got, err) }); err != nil {
					t.Fatalf("Submit %d: %v", i, err)
				}
			}
			if err := p.Flush(); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			if len(got) != len(steps) {
				t.Fatalf("got %d answers for %d requests", len(got), len(steps))
			}
			for i, s := range steps {
				switch {
				case s.want == 0 && got[i] != nil:
					t.Errorf("request %d (%s): got %v, want success", i, show(s.r), got[i])
				case s.want != 0 && !errors.Is(got[i], s.want):
					t.Errorf("request %d (%s): got %v, want %s", i, show(s.r), got[i], unix.ErrnoName(s.want))
				}
			}
			expectServices(t, c, a, stored(b))
			expectDests(t, c, a, wantA...)
			expectDests(t, c, b, wantB...)
			expectTimeouts(t, c, ipvs.Timeouts{TCP: 77, TCPFin: 120, UDP: 300})
			// A flushed pipeline can go on.
			if err := p.Submit(delSvc(a), func(err error) { got = append(got, err) }); err != nil {
				t.Fatalf("Submit after Flush: %v", err)
			}
			if err := p.Flush(); err != nil || len(got) != len(steps)+1 || got[len(steps)] != nil {
				t.Fatalf("delete after Flush: flush %v, answers %d, last %v", err, len(got), got[len(got)-1])
			}
			expectServices(t, c, stored(b))
		})
	}
}

// testLargeDumps covers answers that span many netlink datagrams.
func testLargeDumps(t *testing.T, c ipvs.Client) {
	p := c.Pipeline(64)
	var errs []error
	var want []ipvs.Service
	submit := func(r ipvs.Request) {
		if err := p.Submit(r, func(err error) {
			if err != nil {
				errs = append(errs, err)
			}
		}); err != nil {
			t.Fatalf("Submit: %v", err)
		}
	}
	for i := range 400 {
		s := with(svc(ipvs.ProtoTCP, fmt.Sprintf("10.2.%d.%d", i/250, i%250+1), uint16(i+1)), func(s *ipvs.Service) {
			s.Scheduler = []string{"rr", "wlc", "sh", "mh"}[i%4]
			s.Flags = ipvs.ServiceFlags(i%8) & (ipvs.FlagPersistent | ipvs.FlagOnePacket)
		})
		if s.Flags&ipvs.FlagPersistent != 0 {
			s.Timeout = 300
		}
		submit(addSvc(s))
		want = append(want, s)
	}
	big := svc(ipvs.ProtoTCP, "10.3.0.1", 80)
	submit(addSvc(big))
	want = append(want, big)
	var wantDests []ipvs.Destination
	for i := range 300 {
		d := with(dst(fmt.Sprintf("172.16.%d.%d", i/200, i%200+1), uint16(8000+i)), func(d *ipvs.Destination) {
			d.Weight, d.UThreshold, d.LThreshold = uint32(i), uint32(i*2), uint32(i)
		})
		submit(addDst(big, d))
		wantDests = append([]ipvs.Destination{d}, wantDests...)
	}
	if err := p.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if len(errs) > 0 {
		t.Fatalf("%d requests failed, first: %v", len(errs), errs[0])
	}
	expectServices(t, c, want...)
	expectDests(t, c, big, wantDests...)
}
