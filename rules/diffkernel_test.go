package rules_test

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"github.com/lvskit/lvskit/rules"
)

// churning is the fake as a reader whose first changes service dumps each
// see a service added and another deleted in the middle, as the kernel's
// resumed dumps of a large table do when another program edits it.
type churning struct {
	*ipvstest.Fake
	changes int // dumps still to disturb
	next    byte
}

// ReplyDatagrams says every answer came in several datagrams, as a
// large table's does: one read is then no snapshot.
func (c *churning) ReplyDatagrams() int { return 2 }

func (c *churning) DumpServices(fn func(*ipvs.ServiceEntry) error) error {
	n := 0
	return c.Fake.DumpServices(func(s *ipvs.ServiceEntry) error {
		if n++; n == 2 && c.changes > 0 {
			c.changes--
			c.next++
			add := tcp(200, c.next)
			del := tcp(200, c.next-1)
			if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &add}); err != nil {
				return err
			}
			_ = c.Exec(ipvs.Request{Cmd: ipvs.CmdDelService, Service: &del})
		}
		return fn(s)
	})
}

func tcp(a, b byte) ipvs.Service {
	return ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.AddrFrom4([4]byte{10, 0, a, b}),
		Port: 80, Scheduler: "rr", Netmask: 0xffffffff}
}

// tcpTable is a fake kernel holding the services tcp(0, 1) to tcp(0, n),
// and the set of them.
func tcpTable(t *testing.T, n byte) (*ipvstest.Fake, *rules.Set) {
	t.Helper()
	f := ipvstest.New()
	set := &rules.Set{}
	for i := byte(1); i <= n; i++ {
		s := tcp(0, i)
		if err := f.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}); err != nil {
			t.Fatal(err)
		}
		set.Services = append(set.Services, rules.Service{Service: s})
	}
	return f, set
}

func TestDiffKernelRereadsAChangingTable(t *testing.T) {
	f, desired := tcpTable(t, 4)

	// Two disturbed reads, then quiet: the plan comes from the third
	// read, and it deletes exactly the one service the churn left.
	c := &churning{Fake: f, changes: 2}
	p, err := rules.DiffKernel(c, desired, rules.DiffOptions{})
	if err != nil {
		t.Fatalf("DiffKernel: %v", err)
	}
	if c.changes != 0 {
		t.Fatalf("%d disturbed reads left: the plan did not wait for a quiet read", c.changes)
	}
	dels := 0
	for _, ch := range p.Changes {
		if ch.Action == rules.DeleteService {
			dels++
		}
	}
	if dels != 1 || len(p.Changes) != 1 {
		t.Errorf("plan after the churn: %d changes, %d service deletions; want the one service the churn left deleted: %+v", len(p.Changes), dels, p.Changes)
	}

	// A table that changes during every read gets no plan.
	c = &churning{Fake: f, changes: 100, next: c.next}
	if _, err := rules.DiffKernel(c, desired, rules.DiffOptions{}); !errors.Is(err, rules.ErrTableChanging) {
		t.Errorf("DiffKernel of a table changing during every read: %v, want ErrTableChanging", err)
	}
}

// churningDests is the fake as a reader whose destination dumps come in
// several datagrams, with a real server added after each of the first
// reads, as another program might between two datagrams.
type churningDests struct {
	*ipvstest.Fake
	changes int
	next    byte
}

func (c *churningDests) ReplyDatagrams() int { return 2 }

func (c *churningDests) AppendDestinations(dst []ipvs.DestinationEntry, svc *ipvs.Service) ([]ipvs.DestinationEntry, error) {
	dst, err := c.Fake.AppendDestinations(dst, svc)
	if err == nil && c.changes > 0 {
		c.changes--
		c.next++
		d := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.AddrFrom4([4]byte{192, 168, 9, c.next}), Port: 80, Weight: 1}
		err = c.Exec(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: svc, Dest: &d})
	}
	return dst, err
}

func TestDiffKernelRereadsChangingDestinations(t *testing.T) {
	f := ipvstest.New()
	s := tcp(0, 1)
	if err := f.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}); err != nil {
		t.Fatal(err)
	}
	desired := &rules.Set{Services: []rules.Service{{Service: s}}}

	// Two reads disturbed: the third agrees with the fourth, and the plan
	// deletes both servers the churn added.
	c := &churningDests{Fake: f, changes: 2}
	p, err := rules.DiffKernel(c, desired, rules.DiffOptions{})
	if err != nil {
		t.Fatalf("DiffKernel: %v", err)
	}
	if len(p.Changes) != 2 {
		t.Errorf("plan: %d changes, want the 2 servers the churn added deleted: %+v", len(p.Changes), p.Changes)
	}
	for _, ch := range p.Changes {
		if ch.Action != rules.DeleteDest {
			t.Errorf("unexpected change %+v", ch)
		}
	}

	// Destinations that change during every read get no plan.
	c = &churningDests{Fake: f, changes: 100, next: c.next}
	if _, err := rules.DiffKernel(c, desired, rules.DiffOptions{}); !errors.Is(err, rules.ErrTableChanging) {
		t.Errorf("DiffKernel of destinations changing during every read: %v, want ErrTableChanging", err)
	}
}

// A read the reader answered in one datagram is a snapshot: the plan
// comes from it without a second read.
func TestDiffKernelTrustsOneDatagram(t *testing.T) {
	f := ipvstest.New()
	s := tcp(0, 1)
	if err := f.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}); err != nil {
		t.Fatal(err)
	}
	r := &countingReader{Fake: f}
	if _, err := rules.DiffKernel(r, &rules.Set{}, rules.DiffOptions{}); err != nil {
		t.Fatal(err)
	}
	if r.serviceReads != 1 {
		t.Errorf("%d reads of the services; a one-datagram answer needs 1", r.serviceReads)
	}
}

type countingReader struct {
	*ipvstest.Fake
	serviceReads int
}

func (r *countingReader) ReplyDatagrams() int { return 1 }

func (r *countingReader) DumpServices(fn func(*ipvs.ServiceEntry) error) error {
	r.serviceReads++
	return r.Fake.DumpServices(fn)
}

// Tunnel settings matter only for tunnelled servers: a masquerading one
// whose kernel entry carries tunnel settings (another program set them;
// the kernel's getsockopt interface reports them as zero) is in sync
// with a file without them, and a tunnelled one's settings are compared.
func TestDiffKernelComparesTunnelSettingsOfTunnelsOnly(t *testing.T) {
	f := ipvstest.New()
	s := tcp(0, 1)
	masq := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.MustParseAddr("192.168.0.1"), Port: 80, FwdMethod: ipvs.FwdMasq, Weight: 1,
		TunType: ipvs.TunGUE, TunPort: 6080}
	tun := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.MustParseAddr("192.168.0.2"), Port: 80, FwdMethod: ipvs.FwdTunnel, Weight: 1,
		TunType: ipvs.TunGUE, TunPort: 6080}
	for _, r := range []ipvs.Request{{Cmd: ipvs.CmdNewService, Service: &s}, {Cmd: ipvs.CmdNewDest, Service: &s, Dest: &masq}, {Cmd: ipvs.CmdNewDest, Service: &s, Dest: &tun}} {
		if err := f.Exec(r); err != nil {
			t.Fatal(err)
		}
	}
	wantMasq, wantTun := masq, tun
	wantMasq.TunType, wantMasq.TunPort = 0, 0
	wantTun.TunPort = 6081
	desired := &rules.Set{Services: []rules.Service{{Service: s, Dests: []rules.Dest{{Destination: wantMasq}, {Destination: wantTun}}}}}
	p, err := rules.DiffKernel(f, desired, rules.DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Changes) != 1 || p.Changes[0].Dest == nil || p.Changes[0].Dest.Addr != tun.Addr {
		t.Fatalf("changes %+v, want one edit of the tunnelled server", p.Changes)
	}
	if f := p.Changes[0].Fields; len(f) != 1 || f[0].Name != "tun-port" {
		t.Errorf("fields %+v, want tun-port alone", f)
	}
}

// snapshotReader answers in several datagrams and takes snapshots of the
// service keys, as ipvs.Conn does for a large table of IPv4 services.
type snapshotReader struct {
	countingReader
	keys func() ([]ipvs.Service, bool)
}

func (r *snapshotReader) ReplyDatagrams() int { return 2 }

func (r *snapshotReader) SnapshotServiceKeys(dst []ipvs.Service) ([]ipvs.Service, bool) {
	keys, ok := r.keys()
	return append(dst, keys...), ok
}

// A read in several datagrams is checked against a snapshot of the
// service keys instead of a second read when the reader can take one; a
// snapshot that differs, or none, means a second read.
func TestDiffKernelChecksWithASnapshot(t *testing.T) {
	f, _ := tcpTable(t, 3)
	same := func() ([]ipvs.Service, bool) {
		svcs, _ := f.Services()
		var keys []ipvs.Service
		for _, s := range svcs {
			keys = append(keys, s.Service)
		}
		return keys, true
	}
	for _, tc := range []struct {
		name  string
		keys  func() ([]ipvs.Service, bool)
		reads int
	}{
		{"equal", same, 1},
		{"one missing", func() ([]ipvs.Service, bool) { k, _ := same(); return k[1:], true }, 2},
		{"none", func() ([]ipvs.Service, bool) { return nil, false }, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &snapshotReader{countingReader: countingReader{Fake: f}, keys: tc.keys}
			if _, err := rules.DiffKernel(r, &rules.Set{}, rules.DiffOptions{}); err != nil {
				t.Fatal(err)
			}
			if r.serviceReads != tc.reads {
				t.Errorf("%d reads of the services, want %d", r.serviceReads, tc.reads)
			}
		})
	}
}

// TestCompareDestsAgreesWithAddrCompare: the fast comparison orders
// destinations as DestKey's fields with netip.Addr.Compare do.
func TestCompareDestsAgreesWithAddrCompare(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	addrs := []netip.Addr{
		netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("255.255.255.255"), netip.MustParseAddr("10.0.0.1"),
		netip.MustParseAddr("::"), netip.MustParseAddr("::ffff:10.0.0.1"), netip.MustParseAddr("2001:db8::1"),
		netip.MustParseAddr("fe80::1%eth0"), netip.MustParseAddr("fe80::1"),
	}
	random := func() ipvs.Destination {
		var a netip.Addr
		switch rng.IntN(3) {
		case 0:
			a = netip.AddrFrom4([4]byte{byte(rng.IntN(3)), byte(rng.IntN(256)), byte(rng.IntN(3)), byte(rng.IntN(256))})
		case 1:
			a = addrs[rng.IntN(len(addrs))]
		default:
			a = netip.AddrFrom16([16]byte{0x20, 0x01, 15: byte(rng.IntN(3))})
		}
		f := ipvs.AFInet
		if a.Is6() != (rng.IntN(10) == 0) {
			f = ipvs.AFInet6
		}
		return ipvs.Destination{Family: f, Addr: a, Port: uint16(rng.IntN(3))}
	}
	sign := func(c int) int { return min(max(c, -1), 1) }
	for range 200000 {
		a, b := random(), random()
		want := 0
		switch {
		case a.Family != b.Family:
			want = sign(int(a.Family) - int(b.Family))
		case a.Addr.Compare(b.Addr) != 0:
			want = a.Addr.Compare(b.Addr)
		default:
			want = sign(int(a.Port) - int(b.Port))
		}
		if got := sign(rules.CompareDests(&a, &b)); got != want {
			t.Fatalf("CompareDests(%v:%d %v, %v:%d %v) = %d, want %d", a.Addr, a.Port, a.Family, b.Addr, b.Port, b.Family, got, want)
		}
		if got := sign(rules.DestKeyOf(&a).Compare(rules.DestKeyOf(&b))); got != want {
			t.Fatalf("DestKey.Compare disagrees: %d, want %d", got, want)
		}
	}
}

// A plan limited by Only reads and changes the services it accepts
// alone; ChangedServices names those whose configuration differs.
func TestDiffKernelOnly(t *testing.T) {
	f, old := tcpTable(t, 3)
	// The new set drops 10.0.0.3, edits 10.0.0.2 and adds 10.0.0.4.
	changedSvc := tcp(0, 2)
	changedSvc.Scheduler = "wrr"
	desired := &rules.Set{Services: []rules.Service{{Service: tcp(0, 1)}, {Service: changedSvc}, {Service: tcp(0, 4)}}}
	changed := rules.ChangedServices(old, desired)
	want := map[rules.ServiceKey]bool{}
	for _, b := range []byte{2, 3, 4} {
		s := tcp(0, b)
		want[rules.KeyOf(&s)] = true
	}
	if len(changed) != len(want) {
		t.Fatalf("changed %v, want %v", changed, want)
	}
	for k := range want {
		if !changed[k] {
			t.Errorf("%s not among the changed %v", k, changed)
		}
	}
	// Only 10.0.0.2 and 10.0.0.3 in scope: 10.0.0.4 is not added.
	only := map[rules.ServiceKey]bool{}
	for _, b := range []byte{2, 3} {
		s := tcp(0, b)
		only[rules.KeyOf(&s)] = true
	}
	p, err := rules.DiffKernel(f, desired, rules.DiffOptions{Only: func(k rules.ServiceKey) bool { return only[k] }})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range p.Changes {
		got = append(got, string(c.Action)+" "+rules.KeyOf(&c.Service).String())
	}
	if len(got) != 2 || got[0] != "edit-service -t 10.0.0.2:80" || got[1] != "delete-service -t 10.0.0.3:80" {
		t.Errorf("changes %q, want the edit of 10.0.0.2 and the deletion of 10.0.0.3 alone", got)
	}
}
