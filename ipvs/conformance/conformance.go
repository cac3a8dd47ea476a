// Package conformance is the suite of IPVS behaviours every ipvs.Client must
// show.
//
// It runs on the in-memory fake (package ipvs/ipvstest, on the host) and on
// the netlink client against the real kernel (in the lab). Each case asserts
// exact stored values and exact errnos, so passing on both proves the fake
// answers like the kernel for everything the suite covers.
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

// cases in the order Run runs them; each topic's cases are in a file of
// their own: tables.go, services.go, destinations.go, daemons.go and
// requests.go.
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
