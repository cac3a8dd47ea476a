package ipvs_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/conformance"
)

// openLegacy opens a Conn over k that also has k's legacy interface, with
// SkipStats on so that it uses it.
func openLegacy(t *testing.T, k *fakeKernel) *ipvs.Conn {
	t.Helper()
	c := openFake(t, k)
	ipvs.UseLegacyForTest(c, k)
	ipvs.SkipStats(c, true)
	return c
}

// TestConformanceWithLegacyReads runs the shared suite with destinations
// read over the legacy interface wherever its answer is complete.
func TestConformanceWithLegacyReads(t *testing.T) {
	conformance.Run(t, func(t *testing.T) ipvs.Client { return openLegacy(t, newFakeKernel()) })
}

// v4Service is an IPv4 service as the tests add it.
func v4Service(proto ipvs.Protocol, a string, port uint16) ipvs.Service {
	return ipvs.Service{Family: ipvs.AFInet, Protocol: proto, Addr: netip.MustParseAddr(a), Port: port, Scheduler: "wlc", Netmask: 0xffffffff}
}

// destination is a real server of the family of its address.
func destination(a string, port uint16, fwd ipvs.FwdMethod, weight uint32) ipvs.Destination {
	ip := netip.MustParseAddr(a)
	fam := ipvs.AFInet
	if ip.Is6() {
		fam = ipvs.AFInet6
	}
	return ipvs.Destination{Family: fam, Addr: ip, Port: port, FwdMethod: fwd, Weight: weight}
}

// legacyTable fills k with services whose destinations the legacy
// interface can and cannot read whole, and returns them with whether it
// can.
func legacyTable(t *testing.T, k *fakeKernel) map[string]bool {
	t.Helper()
	v4, dest := v4Service, destination
	plain := v4(ipvs.ProtoTCP, "10.0.0.1", 80)
	udp := v4(ipvs.ProtoUDP, "10.0.0.1", 53)
	mark := ipvs.Service{Family: ipvs.AFInet, FWMark: 7, Scheduler: "rr", Netmask: 0xffffffff}
	empty := v4(ipvs.ProtoSCTP, "10.0.0.3", 5060)
	mixed := v4(ipvs.ProtoTCP, "10.0.0.4", 80)
	tunnel := v4(ipvs.ProtoTCP, "10.0.0.5", 80)
	six := ipvs.Service{Family: ipvs.AFInet6, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("2001:db8::1"), Port: 443, Scheduler: "wlc", Netmask: 128}
	thresholds := dest("192.168.1.3", 8080, ipvs.FwdMasq, 3)
	thresholds.UThreshold, thresholds.LThreshold = 100, 50
	gue := dest("192.168.5.1", 80, ipvs.FwdTunnel, 1)
	gue.TunType, gue.TunPort = ipvs.TunGUE, 6080
	var reqs []ipvs.Request
	add := func(s ipvs.Service, ds ...ipvs.Destination) {
		reqs = append(reqs, ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s})
		for i := range ds {
			reqs = append(reqs, ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &ds[i]})
		}
	}
	add(plain, dest("192.168.1.1", 80, ipvs.FwdMasq, 1), dest("192.168.1.2", 80, ipvs.FwdRoute, 0), thresholds)
	add(udp, dest("192.168.2.1", 53, ipvs.FwdMasq, 2147483647))
	add(mark, dest("192.168.3.1", 0, ipvs.FwdRoute, 1))
	add(empty)
	add(mixed, dest("192.168.4.1", 80, ipvs.FwdMasq, 1), dest("2001:db8:4::1", 80, ipvs.FwdTunnel, 1))
	add(tunnel, dest("192.168.5.2", 80, ipvs.FwdRoute, 1), gue)
	add(six, dest("2001:db8:6::1", 443, ipvs.FwdMasq, 1))
	for _, r := range reqs {
		if err := k.fake.Exec(r); err != nil {
			t.Fatalf("%v: %v", r.Cmd, err)
		}
	}
	if err := k.fake.SetDestinationCounters(plain, thresholds, ipvs.DestCounters{ActiveConns: 5, InactConns: 6, PersistConns: 7}); err != nil {
		t.Fatal(err)
	}
	return map[string]bool{
		key(plain): true, key(udp): true, key(mark): true, key(empty): true,
		key(mixed): false, key(tunnel): false, key(six): false,
	}
}

func key(s ipvs.Service) string {
	if s.FWMark != 0 {
		return fmt.Sprintf("fwm %d/%v", s.FWMark, s.Family)
	}
	return fmt.Sprintf("%v %v:%d", s.Protocol, s.Addr, s.Port)
}

// TestLegacyReadsEqualDumps: every service reads the same over the
// legacy interface as over netlink, and only those whose legacy answer
// is complete were read that way (the mixed-family one is short by its
// IPv6 server, the tunnelled one lacks its tunnel settings, IPv6 has no
// legacy interface).
func TestLegacyReadsEqualDumps(t *testing.T) {
	k := newFakeKernel()
	canRead := legacyTable(t, k)
	viaNetlink := openFake(t, k)
	ipvs.SkipStats(viaNetlink, true)
	c := openLegacy(t, k)
	svcs, err := c.Services()
	if err != nil {
		t.Fatal(err)
	}
	if len(svcs) != len(canRead) {
		t.Fatalf("%d services, want %d", len(svcs), len(canRead))
	}
	for _, s := range svcs {
		before, _ := ipvs.LegacyReadsForTest(c)
		got, err := ipvs.AppendDestinations(c, nil, &s.Service)
		if err != nil {
			t.Fatalf("%s: %v", key(s.Service), err)
		}
		want, err := ipvs.AppendDestinations(viaNetlink, nil, &s.Service)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n legacy  %+v\n netlink %+v", key(s.Service), got, want)
		}
		after, enabled := ipvs.LegacyReadsForTest(c)
		if read := after > before; read != canRead[key(s.Service)] || !enabled {
			t.Errorf("%s: read with the legacy interface: %v, want %v (still enabled: %v)", key(s.Service), read, canRead[key(s.Service)], enabled)
		}
		if n := c.ReplyDatagrams(); n != 1 {
			t.Errorf("%s: ReplyDatagrams %d, want 1 (a snapshot)", key(s.Service), n)
		}
	}
}

// TestLegacyReadsNeedSkipStats: the legacy interface has 32-bit counters,
// so listings that print counters never use it.
func TestLegacyReadsNeedSkipStats(t *testing.T) {
	k := newFakeKernel()
	legacyTable(t, k)
	c := openLegacy(t, k)
	ipvs.SkipStats(c, false)
	svcs, _ := c.Services()
	for _, s := range svcs {
		if _, err := ipvs.AppendDestinations(c, nil, &s.Service); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := ipvs.LegacyReadsForTest(c); n != 0 {
		t.Errorf("%d legacy reads with counters wanted", n)
	}
}

// TestLegacyReadsOfAChangingService: a service that changes around the
// legacy answer is read whole. A server added before the answer is in it
// (the count after agrees: a snapshot). One added before and another
// deleted after the answer leave a count after that differs from the
// answer, and the service is read over netlink, which lists it as it is
// now.
func TestLegacyReadsOfAChangingService(t *testing.T) {
	s := v4Service(ipvs.ProtoUDP, "10.0.0.1", 53)
	first := destination("192.168.2.1", 53, ipvs.FwdMasq, 0)
	extra := destination("192.168.2.2", 53, ipvs.FwdMasq, 1)
	for _, tc := range []struct {
		name        string
		deleteFirst bool
		wantServers []netip.Addr
		wantLegacy  int
	}{
		{"grows", false, []netip.Addr{extra.Addr, first.Addr}, 1},
		{"grows and shrinks", true, []netip.Addr{extra.Addr}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeKernel()
			legacyTable(t, k)
			c := openLegacy(t, k)
			exec := func(r ipvs.Request) {
				if err := k.fake.Exec(r); err != nil {
					t.Fatal(err)
				}
			}
			k.beforeLegacyDests = func() {
				k.beforeLegacyDests = nil
				exec(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &extra})
			}
			if tc.deleteFirst {
				k.afterLegacyDests = func() {
					k.afterLegacyDests = nil
					exec(ipvs.Request{Cmd: ipvs.CmdDelDest, Service: &s, Dest: &first})
				}
			}
			got, err := ipvs.AppendDestinations(c, nil, &s)
			if err != nil {
				t.Fatal(err)
			}
			var addrs []netip.Addr
			for _, d := range got {
				addrs = append(addrs, d.Addr)
			}
			if !slices.Equal(addrs, tc.wantServers) {
				t.Errorf("servers %v, want %v", addrs, tc.wantServers)
			}
			if n, _ := ipvs.LegacyReadsForTest(c); n != tc.wantLegacy {
				t.Errorf("%d legacy reads, want %d", n, tc.wantLegacy)
			}
		})
	}
}

// TestSnapshotServiceKeys: the snapshot holds the IPv4 services' keys
// in dump order (IPv6 ones are not in it); a table that gains a service
// during the read gives none.
func TestSnapshotServiceKeys(t *testing.T) {
	k := newFakeKernel()
	legacyTable(t, k)
	c := openLegacy(t, k)
	svcs, err := c.Services()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range svcs {
		if s.Family == ipvs.AFInet {
			want = append(want, key(s.Service))
		}
	}
	keys, ok := c.SnapshotServiceKeys(nil)
	var got []string
	for _, s := range keys {
		got = append(got, key(s))
	}
	if !ok || !slices.Equal(got, want) {
		t.Errorf("snapshot %v (%v), want %v", got, ok, want)
	}
	k.beforeLegacyServices = func() {
		k.beforeLegacyServices = nil
		s := v4Service(ipvs.ProtoTCP, "10.0.9.9", 80)
		if err := k.fake.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}); err != nil {
			t.Fatal(err)
		}
	}
	if keys, ok := c.SnapshotServiceKeys(nil); ok {
		t.Errorf("a table that grew during the read gave a snapshot: %v", keys)
	}
}

// TestLegacyRefusals: a service deleted since the dump (ESRCH) is left to
// netlink and the legacy interface stays; any other refusal turns it off.
func TestLegacyRefusals(t *testing.T) {
	k := newFakeKernel()
	legacyTable(t, k)
	c := openLegacy(t, k)
	gone := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.9.9.9"), Port: 80}
	got, err := ipvs.AppendDestinations(c, nil, &gone)
	if err != nil || len(got) != 0 {
		t.Errorf("missing service: %v, %v; want an empty list as the dump gives", got, err)
	}
	if _, enabled := ipvs.LegacyReadsForTest(c); !enabled {
		t.Errorf("ESRCH turned the legacy interface off")
	}
	k.legacyErr = unix.EPERM
	s := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 80}
	got, err = ipvs.AppendDestinations(c, nil, &s)
	if err != nil || len(got) != 3 {
		t.Errorf("after EPERM: %v, %v; want the 3 destinations over netlink", got, err)
	}
	if _, enabled := ipvs.LegacyReadsForTest(c); enabled {
		t.Errorf("EPERM left the legacy interface on")
	}
}

// TestLegacyRequestsPerService: the destinations of a table read in
// order cost two requests a service (the answer, offering twice the room
// the last service needed, and the count after it); a service larger than
// the room is counted and asked again, and is read whole; one that grows
// again meanwhile goes to netlink.
func TestLegacyRequestsPerService(t *testing.T) {
	k := newFakeKernel()
	var svcs []ipvs.Service
	addService := func(i, dests int) {
		s := v4Service(ipvs.ProtoTCP, fmt.Sprintf("10.0.1.%d", i+1), 80)
		execFake(t, k, ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s})
		for j := range dests {
			d := destination(fmt.Sprintf("172.%d.%d.%d", 16+j/250, j%250, i+1), 80, ipvs.FwdMasq, 1)
			execFake(t, k, ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d})
		}
		svcs = append(svcs, s)
	}
	for i := range 20 {
		addService(i, i%4)
	}
	addService(20, 100) // more than twice the last one's
	c := openLegacy(t, k)
	read := func(s *ipvs.Service) []ipvs.DestinationEntry {
		t.Helper()
		got, err := ipvs.AppendDestinations(c, nil, s)
		want, _ := k.fake.Destinations(*s)
		if err != nil || len(got) != len(want) {
			t.Fatalf("%s: %d servers (%v), want %d", key(*s), len(got), err, len(want))
		}
		return got
	}
	k.legacyCalls = nil
	for i := range 20 {
		read(&svcs[i])
	}
	if n, m := k.legacyCalls[ipvs.SoGetService], k.legacyCalls[ipvs.SoGetDests]; n != 20 || m != 20 {
		t.Errorf("%d count and %d destination requests for 20 services, want one of each a service", n, m)
	}
	k.legacyCalls = nil
	read(&svcs[20])
	if n, m := k.legacyCalls[ipvs.SoGetService], k.legacyCalls[ipvs.SoGetDests]; n != 2 || m != 2 {
		t.Errorf("the large service: %d count and %d destination requests, want 2 and 2 (room full, counted, asked again)", n, m)
	}
	if n, _ := ipvs.LegacyReadsForTest(c); n != 21 {
		t.Errorf("%d services read with the legacy interface, want 21", n)
	}
	// Large again, and growing between its count and the second answer.
	addService(21, 300)
	k.beforeLegacyDests = func() {
		if k.legacyCalls[ipvs.SoGetDests] == 2 {
			d := destination("192.168.250.250", 80, ipvs.FwdMasq, 1)
			execFake(t, k, ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &svcs[21], Dest: &d})
		}
	}
	k.legacyCalls = nil
	read(&svcs[21])
	if n, _ := ipvs.LegacyReadsForTest(c); n != 21 {
		t.Errorf("a service that filled the room twice was kept from the legacy interface (%d reads)", n)
	}
}

func execFake(t *testing.T, k *fakeKernel, r ipvs.Request) {
	t.Helper()
	if err := k.fake.Exec(r); err != nil {
		t.Fatal(err)
	}
}
