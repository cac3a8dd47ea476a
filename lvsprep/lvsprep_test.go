package lvsprep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lvskit/lvskit/internal/netnsid"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"github.com/lvskit/lvskit/netfilter"
	"github.com/lvskit/lvskit/netfilter/netfiltertest"
)

// unclosed keeps the fake IPVS open across runs, as the kernel's tables
// outlive each lvsprep process.
type unclosed struct{ *ipvstest.Fake }

func (unclosed) Close() error { return nil }

// testHost is a Host made of netfilter's fakes, plus the pieces of kernel
// behaviour lvsprep depends on: loading ip_vs creates net/ipv4/vs/*, loading
// ipip creates tunl0 and its conf sysctls.
type testHost struct {
	*Host
	t        *testing.T
	sysRoot  string
	links    *netfiltertest.FakeLinks
	rules4   *netfiltertest.FakeIPTables
	rules6   *netfiltertest.FakeIPTables
	modules  *netfiltertest.FakeModules
	stateDir string
	root     bool
	ident    netnsid.Identity
	ipvs     *ipvstest.Fake
}

type kernelModules struct{ th *testHost }

func (k kernelModules) Loaded(name string) (bool, error) { return k.th.modules.Loaded(name) }

func (k kernelModules) Load(name string) error {
	if err := k.th.modules.Load(name); err != nil {
		return err
	}
	switch name {
	case "ip_vs":
		k.th.setSysctl("net/ipv4/vs/conntrack", "0")
		k.th.setSysctl("net/ipv4/vs/sloppy_tcp", "0")
		k.th.setSysctl("net/ipv4/vs/sloppy_sctp", "0")
		k.th.setSysctl("net/ipv4/vs/schedule_icmp", "0")
	case "ipip":
		k.th.links.Links["tunl0"] = &netfiltertest.FakeLink{}
		k.th.confSysctls("tunl0", "0")
	case "ip6_tunnel":
		k.th.links.Links["ip6tnl0"] = &netfiltertest.FakeLink{}
	}
	return nil
}

func (k kernelModules) Unload(name string) error {
	if err := k.th.modules.Unload(name); err != nil {
		return err
	}
	switch name {
	case "ip_vs":
		os.RemoveAll(filepath.Join(k.th.sysRoot, "net/ipv4/vs"))
	case "ipip":
		delete(k.th.links.Links, "tunl0")
		os.RemoveAll(filepath.Join(k.th.sysRoot, "net/ipv4/conf/tunl0"))
	case "ip6_tunnel":
		delete(k.th.links.Links, "ip6tnl0")
	}
	return nil
}

func (th *testHost) setSysctl(name, value string) {
	th.t.Helper()
	p := filepath.Join(th.sysRoot, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		th.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(value+"\n"), 0o644); err != nil {
		th.t.Fatal(err)
	}
}

func (th *testHost) sysctl(name string) string {
	th.t.Helper()
	v, err := th.Sysctl.Get(name)
	if err != nil {
		th.t.Fatal(err)
	}
	return v
}

func (th *testHost) confSysctls(dev, rpFilter string) {
	th.setSysctl("net/ipv4/conf/"+dev+"/arp_ignore", "0")
	th.setSysctl("net/ipv4/conf/"+dev+"/arp_announce", "0")
	th.setSysctl("net/ipv4/conf/"+dev+"/rp_filter", rpFilter)
	th.setSysctl("net/ipv4/conf/"+dev+"/accept_local", "0")
}

// newTestHost is a host with lo and eth0 (up, 172.16.0.2/24, default route
// via 172.16.0.254) and a Debian-like sysctl tree: forwarding off, ARP
// defaults, loose reverse-path filtering on all, as systemd sets it.
func newTestHost(t *testing.T) *testHost {
	th := &testHost{
		t:        t,
		sysRoot:  t.TempDir(),
		links:    netfiltertest.NewFakeLinks("eth0", "eth1"),
		rules4:   netfiltertest.NewFakeIPTables(),
		rules6:   netfiltertest.NewFakeIPTables(),
		modules:  netfiltertest.NewFakeModules("ip_vs", "ip_vs_mh", "xt_ipvs", "ipip", "ip6_tunnel"),
		stateDir: filepath.Join(t.TempDir(), "state"),
		root:     true,
		ident:    netnsid.Identity{Boot: "b00t", Cookie: 1, Inode: 4026531840},
		ipvs:     ipvstest.New(),
	}
	th.links.Links["eth0"].Up = true
	th.links.Links["eth0"].Addrs = []netip.Prefix{netip.MustParsePrefix("172.16.0.2/24")}
	th.links.Links["eth1"].Up = true
	th.links.Links["eth1"].Addrs = []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24")}
	th.links.Routes = []netfilter.Route{{Gateway: netip.MustParseAddr("172.16.0.254"), Dev: "eth0", Metric: 100, Protocol: 16}}
	th.setSysctl("net/ipv4/ip_forward", "0")
	th.setSysctl("net/ipv6/conf/all/forwarding", "0")
	for _, d := range []string{"all", "default", "lo", "eth0", "eth1"} {
		rp := "0"
		if d == "all" || d == "default" {
			rp = "2"
		}
		th.confSysctls(d, rp)
	}
	th.Host = &Host{
		Sysctl:  netfilter.ProcSys{Root: th.sysRoot},
		Links:   th.links,
		Modules: kernelModules{th},
		IPTables: func(f netfilter.Family) (netfilter.IPTables, error) {
			if f == netfilter.IPv6 {
				return th.rules6, nil
			}
			return th.rules4, nil
		},
		IsRoot: func() bool { return th.root },
		IPVS:   func() (ipvs.Client, error) { return unclosed{th.ipvs}, nil },
		UID:    os.Geteuid(),
		Identity: func() (netnsid.Identity, error) {
			return th.ident, nil
		},
		Now: func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) },
		// eth1's address, as if every peer were on its subnet.
		SourceAddr: func(netip.Addr) (netip.Addr, error) { return netip.MustParseAddr("10.0.0.1"), nil },
	}
	return th
}

// run runs lvsprep with a fresh Host value over the same fakes, as separate
// invocations of the binary would.
func (th *testHost) run(args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	h := *th.Host
	h.ipt = nil
	code = Main(append([]string{"lvsprep", "--state-dir", th.stateDir}, args...), nil, &o, &e, &h)
	return o.String(), e.String(), code
}

func (th *testHost) mustRun(args ...string) string {
	th.t.Helper()
	out, errOut, code := th.run(args...)
	if code != 0 {
		th.t.Fatalf("lvsprep %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// snapshot is everything the fakes hold, as text, to compare hosts exactly.
func (th *testHost) snapshot() string {
	th.t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(th.sysRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		v, err := os.ReadFile(p)
		rel, _ := filepath.Rel(th.sysRoot, p)
		fmt.Fprintf(&b, "sysctl %s=%s", rel, v)
		return err
	})
	if err != nil {
		th.t.Fatal(err)
	}
	for _, n := range slices.Sorted(maps.Keys(th.links.Links)) {
		l := th.links.Links[n]
		fmt.Fprintf(&b, "link %s up=%t addrs=%v\n", n, l.Up, l.Addrs)
	}
	// The kernel lists default routes by metric; the fake in the order
	// they came.
	routes := slices.SortedFunc(slices.Values(th.links.Routes), func(a, b netfilter.Route) int {
		return strings.Compare(fmt.Sprintf("%09d %v", a.Metric, a), fmt.Sprintf("%09d %v", b.Metric, b))
	})
	fmt.Fprintf(&b, "routes %v\n", routes)
	for _, r := range []*netfiltertest.FakeIPTables{th.rules4, th.rules6} {
		for _, k := range slices.Sorted(maps.Keys(r.Rules)) {
			if len(r.Rules[k]) == 0 {
				continue // an empty chain is no trace: built-in chains always exist
			}
			fmt.Fprintf(&b, "rules %s %q\n", k, r.Rules[k])
		}
	}
	fmt.Fprintf(&b, "modules %v\n", slices.Sorted(maps.Keys(th.modules.Present)))
	return b.String()
}

func (th *testHost) stateFiles() []string {
	th.t.Helper()
	s, err := openStore(th.stateDir, os.Geteuid(), false)
	if err != nil {
		th.t.Fatal(err)
	}
	defer s.close()
	keys, err := s.keys()
	if err != nil {
		th.t.Fatal(err)
	}
	return keys
}

func (th *testHost) loadState(key string) (*state, error) {
	s, err := openStore(th.stateDir, os.Geteuid(), false)
	if err != nil {
		return nil, err
	}
	defer s.close()
	return s.load(key)
}

func (th *testHost) hasAddr(dev, prefix string) bool {
	return slices.Contains(th.links.Links[dev].Addrs, netip.MustParsePrefix(prefix))
}

func TestDirectorNATApplyAndUndo(t *testing.T) {
	th := newTestHost(t)
	before := th.snapshot()
	out := th.mustRun("director", "nat", "--vip", "202.103.106.5/24", "--dev", "eth1", "--rs-net", "172.16.0.0/24")
	if !strings.Contains(out, "3 changed, 0 already in place") {
		t.Errorf("apply output does not report 3 changes:\n%s", out)
	}
	if got := th.sysctl("net/ipv4/ip_forward"); got != "1" {
		t.Errorf("ip_forward = %s, want 1", got)
	}
	if !th.hasAddr("eth1", "202.103.106.5/24") {
		t.Errorf("VIP not on eth1: %v", th.links.Links["eth1"].Addrs)
	}
	wantRule := "-s 172.16.0.0/24 ! -d 172.16.0.0/24 -j MASQUERADE"
	if got := th.rules4.Rules["nat/POSTROUTING"]; !slices.Equal(got, []string{wantRule}) {
		t.Errorf("nat POSTROUTING = %q, want [%q]", got, wantRule)
	}
	if got := th.stateFiles(); !slices.Equal(got, []string{"director-nat-202.103.106.5"}) {
		t.Errorf("state files %v", got)
	}

	out = th.mustRun("director", "nat", "--vip", "202.103.106.5", "--undo")
	if !strings.Contains(out, "3 reverted") {
		t.Errorf("undo output:\n%s", out)
	}
	if after := th.snapshot(); after != before {
		t.Errorf("undo left a trace:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := th.stateFiles(); len(got) != 0 {
		t.Errorf("state files left after undo: %v", got)
	}
}

func TestApplyIsIdempotent(t *testing.T) {
	th := newTestHost(t)
	args := []string{"director", "nat", "--vip", "202.103.106.5/24", "--dev", "eth1", "--rs-net", "172.16.0.0/24", "--out-dev", "eth1"}
	th.mustRun(args...)
	once := th.snapshot()
	state1, _ := os.ReadFile(statePath(th.stateDir, "director-nat-202.103.106.5"))
	out := th.mustRun(args...)
	if !strings.Contains(out, "0 changed, 3 already in place") {
		t.Errorf("second apply output:\n%s", out)
	}
	if twice := th.snapshot(); twice != once {
		t.Errorf("second apply changed the host:\n%s\nvs\n%s", once, twice)
	}
	state2, _ := os.ReadFile(statePath(th.stateDir, "director-nat-202.103.106.5"))
	if !bytes.Equal(state1, state2) {
		t.Errorf("second apply rewrote the state:\n%s\nvs\n%s", state1, state2)
	}
	if n := len(th.rules4.Rules["nat/POSTROUTING"]); n != 1 {
		t.Errorf("%d masquerade rules after two applies, want 1", n)
	}
}

func TestSettingsAlreadyInPlaceSurviveUndo(t *testing.T) {
	th := newTestHost(t)
	th.setSysctl("net/ipv4/ip_forward", "1") // the admin's own setting
	out := th.mustRun("director", "nat", "--vip", "202.103.106.5/24", "--dev", "eth1", "--rs-net", "172.16.0.0/24")
	if !strings.Contains(out, "in place  sysctl -w net.ipv4.ip_forward=1") {
		t.Errorf("ip_forward not reported in place:\n%s", out)
	}
	th.mustRun("director", "nat", "--vip", "202.103.106.5", "--undo")
	if got := th.sysctl("net/ipv4/ip_forward"); got != "1" {
		t.Errorf("undo turned off forwarding that was on before lvsprep: %s", got)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	th := newTestHost(t)
	th.root = false // a dry run needs no privileges
	before := th.snapshot()
	out := th.mustRun("--dry-run", "director", "nat", "--vip", "202.103.106.5/24", "--dev", "eth1", "--rs-net", "172.16.0.0/24")
	want := "# director nat --vip 202.103.106.5/24 --dev eth1 --rs-net 172.16.0.0/24 (dry run: nothing is changed)\n" +
		"sysctl -w net.ipv4.ip_forward=1\n" +
		"ip address add 202.103.106.5/24 brd + dev eth1\n" +
		"iptables -t nat -A POSTROUTING -s 172.16.0.0/24 ! -d 172.16.0.0/24 -j MASQUERADE\n"
	if out != want {
		t.Errorf("dry run printed:\n%s\nwant:\n%s", out, want)
	}
	if th.snapshot() != before || len(th.stateFiles()) != 0 {
		t.Error("dry run changed the host or wrote state")
	}

	th.root = true
	th.mustRun("director", "nat", "--vip", "202.103.106.5/24", "--dev", "eth1", "--rs-net", "172.16.0.0/24")
	applied := th.snapshot()
	out = th.mustRun("director", "nat", "--vip", "202.103.106.5", "--undo", "-n")
	want = "# undo director nat --vip 202.103.106.5/24 --dev eth1 --rs-net 172.16.0.0/24 (dry run: nothing is changed)\n" +
		"iptables -t nat -D POSTROUTING -s 172.16.0.0/24 ! -d 172.16.0.0/24 -j MASQUERADE\n" +
		"ip address del 202.103.106.5/24 dev eth1\n" +
		"sysctl -w net.ipv4.ip_forward=0\n"
	if out != want {
		t.Errorf("undo dry run printed:\n%s\nwant:\n%s", out, want)
	}
	if th.snapshot() != applied {
		t.Error("undo dry run changed the host")
	}
	out = th.mustRun("--dry-run", "director", "nat", "--vip", "202.103.106.5/24", "--dev", "eth1", "--rs-net", "172.16.0.0/24")
	if strings.Count(out, "# in place: ") != 3 {
		t.Errorf("dry run after apply should show 3 settings in place:\n%s", out)
	}
}

func TestFailureMidwayRollsBack(t *testing.T) {
	th := newTestHost(t)
	th.setSysctl("net/ipv4/ip_forward", "0")
	before := th.snapshot()
	th.rules4.Faults["append"] = errors.New("iptables: No chain/target/match by that name")
	out, errOut, code := th.run("director", "nat", "--vip", "202.103.106.5/24", "--dev", "eth1", "--rs-net", "172.16.0.0/24")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(errOut, "No chain/target/match") || !strings.Contains(errOut, "rolled back: nothing changed") {
		t.Errorf("stderr does not explain the failure and rollback: %q", errOut)
	}
	for _, w := range []string{"failed    iptables", "reverted  ip address del 202.103.106.5/24 dev eth1", "reverted  sysctl -w net.ipv4.ip_forward=0"} {
		if !strings.Contains(out, w) {
			t.Errorf("stdout lacks %q:\n%s", w, out)
		}
	}
	if after := th.snapshot(); after != before {
		t.Errorf("rollback left a trace:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := th.stateFiles(); len(got) != 0 {
		t.Errorf("state files left after rollback: %v", got)
	}
}

// TestRollbackSaysWhatItLeft: a module this run loaded that cannot be
// unloaded again is reported as left, in the log and in the error, never as
// reverted, and the error does not claim that nothing changed.
func TestRollbackSaysWhatItLeft(t *testing.T) {
	th := newTestHost(t)
	th.modules.InUse["ip_vs"] = true // something starts using it at once
	th.rules4.Faults["append"] = errors.New("iptables: No chain/target/match by that name")
	out, errOut, code := th.run("director", "fullnat", "--vip", "10.0.0.100", "--dev", "eth1", "--snat", "172.16.0.2")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(out, "left      module ip_vs loaded: modprobe: FATAL: Module ip_vs is in use\n") ||
		strings.Contains(out, "modprobe -r ip_vs") || !strings.Contains(out, "reverted  modprobe -r xt_ipvs\n") {
		t.Errorf("rollback log:\n%s", out)
	}
	if !strings.Contains(errOut, "(rolled back, except: module ip_vs loaded: ") || strings.Contains(errOut, "nothing changed") {
		t.Errorf("stderr %q", errOut)
	}
}

func TestRefusalsChangeNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(*testHost)
		args   []string
		code   int
		stderr string
	}{
		{"not root", func(th *testHost) { th.root = false },
			[]string{"realserver", "dr", "--vip", "10.0.0.100", "--dev", "eth0"}, 1, "you must be root to change the host"},
		{"unknown interface", nil,
			[]string{"realserver", "dr", "--vip", "10.0.0.100", "--dev", "eth9"}, 1, `no network interface "eth9"`},
		{"missing module", func(th *testHost) { delete(th.modules.Available, "ipip") },
			[]string{"realserver", "tun", "--vip", "10.0.0.100"}, 1, "Module ipip not found"},
		{"bad address", nil,
			[]string{"realserver", "dr", "--vip", "10.0.0.300", "--dev", "eth0"}, 2, `--vip "10.0.0.300": not an IP address`},
		{"subnet as real-server VIP", nil,
			[]string{"realserver", "dr", "--vip", "10.0.0.100/24", "--dev", "eth0"}, 2, "host address (/32)"},
		{"multicast VIP", nil,
			[]string{"director", "nat", "--vip", "224.0.0.1", "--dev", "eth0", "--rs-net", "172.16.0.0/24"}, 2, "not usable here"},
		{"mixed families", nil,
			[]string{"director", "nat", "--vip", "2001:db8::1", "--dev", "eth0", "--rs-net", "172.16.0.0/24"}, 2, "different address families"},
		{"bad interface name", nil,
			[]string{"realserver", "dr", "--vip", "10.0.0.100", "--dev", "../eth0"}, 2, "not a valid interface name"},
		{"missing flag", nil,
			[]string{"director", "nat", "--vip", "10.0.0.100"}, 2, "--dev is required"},
		{"unknown flag", nil,
			[]string{"director", "nat", "--vip", "10.0.0.100", "--frobnicate"}, 2, "unknown flag --frobnicate"},
		{"snat not local", nil,
			[]string{"director", "fullnat", "--vip", "10.0.0.100", "--dev", "eth1", "--snat", "172.16.0.77"}, 1, "not an address of this host"},
		{"clashing address", func(th *testHost) {
			th.links.Links["lo"].Addrs = append(th.links.Links["lo"].Addrs, netip.MustParsePrefix("10.0.0.100/8"))
		}, []string{"realserver", "dr", "--vip", "10.0.0.100", "--dev", "eth0"}, 1, "is on lo as 10.0.0.100/8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := newTestHost(t)
			if tc.setup != nil {
				tc.setup(th)
			}
			before := th.snapshot()
			_, errOut, code := th.run(tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errOut)
			}
			if !strings.Contains(errOut, tc.stderr) {
				t.Errorf("stderr %q does not contain %q", errOut, tc.stderr)
			}
			if after := th.snapshot(); after != before {
				t.Errorf("refused command changed the host:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if got := th.stateFiles(); len(got) != 0 {
				t.Errorf("state files written: %v", got)
			}
		})
	}
}

func TestRealServerDR(t *testing.T) {
	th := newTestHost(t)
	th.setSysctl("net/ipv4/conf/eth0/arp_announce", "1") // a non-default value undo must restore
	before := th.snapshot()
	th.mustRun("rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0")
	if !th.hasAddr("lo", "10.0.0.100/32") {
		t.Errorf("VIP not on lo: %v", th.links.Links["lo"].Addrs)
	}
	for name, want := range map[string]string{
		"net/ipv4/conf/all/arp_ignore": "1", "net/ipv4/conf/all/arp_announce": "2",
		"net/ipv4/conf/eth0/arp_ignore": "1", "net/ipv4/conf/eth0/arp_announce": "2",
		"net/ipv4/conf/eth1/arp_ignore": "0",
	} {
		if got := th.sysctl(name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	th.mustRun("rs", "dr", "--vip", "10.0.0.100", "--undo")
	if after := th.snapshot(); after != before {
		t.Errorf("undo did not restore exactly:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestRealServerDRIPv6(t *testing.T) {
	th := newTestHost(t)
	before := th.snapshot()
	th.mustRun("rs", "dr", "--vip", "2001:db8::100", "--dev", "eth0")
	if !th.hasAddr("lo", "2001:db8::100/128") {
		t.Errorf("VIP not on lo: %v", th.links.Links["lo"].Addrs)
	}
	if got := th.sysctl("net/ipv4/conf/all/arp_ignore"); got != "0" {
		t.Errorf("an IPv6 VIP changed IPv4 ARP settings: arp_ignore=%s", got)
	}
	th.mustRun("rs", "dr", "--vip", "2001:db8::100", "--undo")
	if after := th.snapshot(); after != before {
		t.Errorf("undo did not restore exactly:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestRealServerTUN(t *testing.T) {
	th := newTestHost(t)
	th.setSysctl("net/ipv4/conf/all/rp_filter", "1") // strict: must be relaxed
	before := th.snapshot()
	out := th.mustRun("rs", "tun", "--vip", "10.0.0.100")
	if !th.modules.Present["ipip"] {
		t.Error("ipip not loaded")
	}
	if l := th.links.Links["tunl0"]; l == nil || !l.Up || !slices.Contains(l.Addrs, netip.MustParsePrefix("10.0.0.100/32")) {
		t.Errorf("tunl0 = %+v, want up with 10.0.0.100/32", l)
	}
	for name, want := range map[string]string{
		"net/ipv4/conf/tunl0/rp_filter": "0", "net/ipv4/conf/all/rp_filter": "2",
		"net/ipv4/conf/all/arp_ignore": "1", "net/ipv4/conf/all/arp_announce": "2",
	} {
		if got := th.sysctl(name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	if !strings.Contains(out, "changed   modprobe ipip") {
		t.Errorf("output:\n%s", out)
	}
	th.mustRun("rs", "tun", "--vip", "10.0.0.100", "--undo")
	if after := th.snapshot(); after != before {
		t.Errorf("undo did not restore exactly:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestRealServerTUNKeepsLooseRPFilter(t *testing.T) {
	th := newTestHost(t) // all.rp_filter is 2 (loose), which already lets the packets in
	th.mustRun("rs", "tun", "--vip", "10.0.0.100")
	if got := th.sysctl("net/ipv4/conf/all/rp_filter"); got != "2" {
		t.Errorf("all.rp_filter = %s, want it left at 2", got)
	}
	th.setSysctl("net/ipv4/conf/all/rp_filter", "0")
	out, _, code := th.run("check", "rs", "tun", "--vip", "10.0.0.100")
	if code != 0 {
		t.Errorf("check with all.rp_filter=0 failed (0 is fine too):\n%s", out)
	}
}

func TestRealServerNATReplacesAndRestoresDefaultRoute(t *testing.T) {
	th := newTestHost(t)
	th.links.Routes = append(th.links.Routes, netfilter.Route{Gateway: netip.MustParseAddr("10.0.0.254"), Dev: "eth1", Metric: 200, Protocol: 4})
	before := th.snapshot()
	out := th.mustRun("rs", "nat", "--gateway", "172.16.0.1", "--dev", "eth0")
	want := []netfilter.Route{{Gateway: netip.MustParseAddr("172.16.0.1"), Dev: "eth0", Protocol: 3}}
	if !slices.Equal(th.links.Routes, want) {
		t.Errorf("routes %v, want %v", th.links.Routes, want)
	}
	// The new route first, so the host always has one.
	wantLog := "changed   ip route add default via 172.16.0.1 dev eth0; " +
		"ip route del default via 172.16.0.254 dev eth0 metric 100 proto dhcp; ip route del default via 10.0.0.254 dev eth1 metric 200 proto static"
	if !strings.Contains(out, wantLog) {
		t.Errorf("output lacks %q:\n%s", wantLog, out)
	}
	th.mustRun("rs", "nat", "--gateway", "172.16.0.1", "--undo")
	if after := th.snapshot(); after != before {
		t.Errorf("undo did not restore the routes:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestDirectorFullNAT(t *testing.T) {
	th := newTestHost(t)
	before := th.snapshot()
	th.mustRun("director", "fullnat", "--vip", "10.0.0.100/24", "--dev", "eth1", "--snat", "172.16.0.2", "--port", "80")
	if !th.modules.Present["ip_vs"] || !th.modules.Present["xt_ipvs"] {
		t.Errorf("modules %v, want ip_vs and xt_ipvs", th.modules.Present)
	}
	if got := th.sysctl("net/ipv4/vs/conntrack"); got != "1" {
		t.Errorf("vs.conntrack = %s, want 1", got)
	}
	if got := th.sysctl("net/ipv4/ip_forward"); got != "1" {
		t.Errorf("ip_forward = %s, want 1", got)
	}
	want := "-m ipvs --vaddr 10.0.0.100/32 --vproto tcp --vport 80 --vmethod MASQ -j SNAT --to-source 172.16.0.2"
	if got := th.rules4.Rules["nat/POSTROUTING"]; !slices.Equal(got, []string{want}) {
		t.Errorf("nat POSTROUTING = %q, want [%q]", got, want)
	}
	th.mustRun("director", "fullnat", "--vip", "10.0.0.100", "--undo")
	if after := th.snapshot(); after != before {
		t.Errorf("undo did not restore exactly:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestUndoLeavesBusyModuleLoaded(t *testing.T) {
	th := newTestHost(t)
	th.mustRun("director", "fullnat", "--vip", "10.0.0.100", "--dev", "eth1", "--snat", "172.16.0.2")
	th.modules.InUse["ip_vs"] = true // services were added meanwhile
	out := th.mustRun("director", "fullnat", "--vip", "10.0.0.100", "--undo")
	// Each setting gets one line, and it tells what happened to it: ip_vs
	// is left, not reverted and then left.
	want := "reverted  iptables -t nat -D POSTROUTING -m ipvs --vaddr 10.0.0.100/32 --vmethod MASQ -j SNAT --to-source 172.16.0.2\n" +
		"reverted  ip address del 10.0.0.100/32 dev eth1\n" +
		"reverted  sysctl -w net.ipv4.vs.conntrack=0\n" +
		"reverted  sysctl -w net.ipv4.ip_forward=0\n" +
		"reverted  modprobe -r xt_ipvs\n" +
		"left      module ip_vs loaded: modprobe: FATAL: Module ip_vs is in use\n" +
		"director fullnat: 5 reverted, 1 left in place; state removed.\n"
	if out != want {
		t.Errorf("undo said:\n%s\nwant:\n%s", out, want)
	}
	if th.modules.Present["xt_ipvs"] || !th.modules.Present["ip_vs"] {
		t.Errorf("modules after undo %v, want only ip_vs", th.modules.Present)
	}
	if got := th.stateFiles(); len(got) != 0 {
		t.Errorf("state left: %v", got)
	}
}

func TestSharedSettingsAreHandedOver(t *testing.T) {
	th := newTestHost(t)
	before := th.snapshot()
	th.mustRun("rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0")
	th.mustRun("rs", "dr", "--vip", "10.0.0.101", "--dev", "eth0")
	out := th.mustRun("rs", "dr", "--vip", "10.0.0.100", "--undo")
	if got := th.sysctl("net/ipv4/conf/all/arp_ignore"); got != "1" {
		t.Errorf("undoing one VIP reset arp_ignore the other still needs: %s\n%s", got, out)
	}
	if !strings.Contains(out, "kept      net.ipv4.conf.all.arp_ignore: realserver dr --vip 10.0.0.101 --dev eth0 still needs it") {
		t.Errorf("undo output:\n%s", out)
	}
	if th.hasAddr("lo", "10.0.0.100/32") || !th.hasAddr("lo", "10.0.0.101/32") {
		t.Errorf("lo addresses %v, want only 10.0.0.101/32", th.links.Links["lo"].Addrs)
	}
	th.mustRun("rs", "dr", "--vip", "10.0.0.101", "--undo")
	if after := th.snapshot(); after != before {
		t.Errorf("undoing both did not restore exactly:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestDriftIsRepairedAndUndoRestoresTheOriginal(t *testing.T) {
	th := newTestHost(t)
	args := []string{"rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0"}
	th.mustRun(args...)
	th.setSysctl("net/ipv4/conf/eth0/arp_ignore", "3") // someone changed it since
	out := th.mustRun(args...)
	if !strings.Contains(out, "1 changed, 5 already in place") {
		t.Errorf("re-apply output:\n%s", out)
	}
	th.mustRun("rs", "dr", "--vip", "10.0.0.100", "--undo")
	if got := th.sysctl("net/ipv4/conf/eth0/arp_ignore"); got != "0" {
		t.Errorf("undo restored %s, want the value from before lvsprep (0)", got)
	}
}

func TestReapplyWithOtherSettingsIsRefused(t *testing.T) {
	th := newTestHost(t)
	th.mustRun("rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0")
	snap := th.snapshot()
	_, errOut, code := th.run("rs", "dr", "--vip", "10.0.0.100", "--dev", "eth1")
	if code != 1 || !strings.Contains(errOut, "already applied with other settings (--vip 10.0.0.100 --dev eth0); undo it first: lvsprep realserver dr --vip 10.0.0.100 --undo") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	if th.snapshot() != snap {
		t.Error("refused re-apply changed the host")
	}
}

func TestUndoWithoutStateIsANoOp(t *testing.T) {
	th := newTestHost(t)
	out := th.mustRun("rs", "dr", "--vip", "10.0.0.100", "--undo")
	if !strings.Contains(out, "nothing to undo") {
		t.Errorf("output %q", out)
	}
}

func TestUndoFailureKeepsTheRest(t *testing.T) {
	th := newTestHost(t)
	th.mustRun("director", "nat", "--vip", "202.103.106.5/24", "--dev", "eth1", "--rs-net", "172.16.0.0/24")
	th.links.Faults["DelAddr"] = errors.New("operation not permitted")
	_, errOut, code := th.run("director", "nat", "--vip", "202.103.106.5", "--undo")
	if code != 1 || !strings.Contains(errOut, "undo incomplete") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	st, err := th.loadState("director-nat-202.103.106.5")
	if err != nil || st == nil || len(st.Records) != 1 || st.Records[0].Kind != kindAddr {
		t.Fatalf("state after a failed undo: %+v, %v; want only the address left", st, err)
	}
	delete(th.links.Faults, "DelAddr")
	th.mustRun("director", "nat", "--vip", "202.103.106.5", "--undo")
	if th.hasAddr("eth1", "202.103.106.5/24") || len(th.stateFiles()) != 0 {
		t.Error("retried undo did not finish")
	}
}

// checkReport is check's output taken apart: the table's rows and, for
// each line that is not ok, the lines under its "# CHECK (STATUS): why"
// comment in the fixes.
type checkReport struct {
	rows  []checkRow // status, check, have
	fixes map[string][]string
}

var fixHeader = regexp.MustCompile(`^  # (.+) \((missing|wrong|conflict|unknown)\):`)

func parseCheck(t *testing.T, out string) checkReport {
	t.Helper()
	rep := checkReport{fixes: map[string][]string{}}
	block := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| STATUS") {
			f := strings.Split(l, "|")
			if len(f) != 5 {
				t.Fatalf("table row %q", l)
			}
			rep.rows = append(rep.rows, checkRow{status: strings.TrimSpace(f[1]), check: strings.TrimSpace(f[2]), have: strings.TrimSpace(f[3])})
			continue
		}
		if m := fixHeader.FindStringSubmatch(l); m != nil {
			block = m[1] + " (" + m[2] + ")"
			rep.fixes[block] = []string{}
			continue
		}
		if block != "" && strings.HasPrefix(l, "  ") {
			rep.fixes[block] = append(rep.fixes[block], strings.TrimPrefix(l, "  "))
		}
	}
	return rep
}

// commands are the lines of a fix block that are not comments.
func commands(lines []string) []string {
	return slices.DeleteFunc(slices.Clone(lines), func(l string) bool { return strings.HasPrefix(l, "#") })
}

func TestCheck(t *testing.T) {
	th := newTestHost(t)
	args := []string{"check", "rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0"}
	out, _, code := th.run(args...)
	if code != 1 {
		t.Errorf("check on an unprepared host: exit %d, want 1", code)
	}
	rep := parseCheck(t, out)
	wantRows := []checkRow{
		{status: "ok", check: "link lo up", have: "up"},
		{status: "missing", check: "VIP 10.0.0.100/32 on lo", have: "absent"},
		{status: "wrong", check: "ARP: arp_ignore=1 on all", have: "0"},
		{status: "wrong", check: "ARP: arp_announce=2 on all", have: "0"},
		{status: "wrong", check: "ARP: arp_ignore=1 on eth0", have: "0"},
		{status: "wrong", check: "ARP: arp_announce=2 on eth0", have: "0"},
	}
	if !slices.EqualFunc(rep.rows, wantRows, func(a, b checkRow) bool { return a.status == b.status && a.check == b.check && a.have == b.have }) {
		t.Errorf("rows %+v, want %+v\n%s", rep.rows, wantRows, out)
	}
	// Each line that is not ok has the one command that fixes it.
	for check, cmd := range map[string]string{
		"VIP 10.0.0.100/32 on lo (missing)":   "ip address add 10.0.0.100/32 dev lo",
		"ARP: arp_ignore=1 on all (wrong)":    "sysctl -w net.ipv4.conf.all.arp_ignore=1",
		"ARP: arp_announce=2 on all (wrong)":  "sysctl -w net.ipv4.conf.all.arp_announce=2",
		"ARP: arp_ignore=1 on eth0 (wrong)":   "sysctl -w net.ipv4.conf.eth0.arp_ignore=1",
		"ARP: arp_announce=2 on eth0 (wrong)": "sysctl -w net.ipv4.conf.eth0.arp_announce=2",
	} {
		if got := commands(rep.fixes[check]); !slices.Equal(got, []string{cmd}) {
			t.Errorf("fix of %q: %q, want %q\n%s", check, got, cmd, out)
		}
	}
	if len(rep.fixes) != 5 {
		t.Errorf("%d fix blocks, want one per line not ok (5):\n%s", len(rep.fixes), out)
	}
	if !strings.Contains(out, "To fix the settings, run:\n  lvsprep realserver dr --vip 10.0.0.100 --dev eth0\n") {
		t.Errorf("check does not name the lvsprep command:\n%s", out)
	}
	th.mustRun(args[1:]...)
	out = th.mustRun(args...)
	if !strings.Contains(out, "Everything is in place.") || !strings.Contains(out, "Applied by lvsprep at 2025-01-02 03:04:05 UTC") {
		t.Errorf("check after apply:\n%s", out)
	}
	th.root = false
	out, _, code = th.run("check", "rs", "dr", "--vip", "10.0.0.100", "--dev", "eth9")
	rep = parseCheck(t, out)
	if code != 1 || !slices.Equal(commands(rep.fixes["interface eth9 exists (missing)"]), []string{"ip -brief link show"}) ||
		len(commands(rep.fixes["ARP: arp_ignore=1 on eth9 (missing)"])) != 0 || strings.Contains(out, "To fix the settings, run") {
		t.Errorf("check with an unknown interface: exit %d\n%s", code, out)
	}
}

// TestCheckOfEveryProfileSaysWhatItChecksAndHowToFixIt: on an unprepared
// host, check of each profile names each setting by what it is for, never
// by the command that makes it, gives every line that is not ok a command
// that fixes it, and the lvsprep command it suggests makes the next check
// pass.
func TestCheckOfEveryProfileSaysWhatItChecksAndHowToFixIt(t *testing.T) {
	for _, args := range [][]string{
		{"director", "nat", "--vip", "202.103.106.5/24", "--dev", "eth1", "--rs-net", "172.16.0.0/24", "--out-dev", "eth0", "--ftp"},
		{"director", "fullnat", "--vip", "10.0.0.100", "--dev", "eth1", "--snat", "172.16.0.2", "--port", "443"},
		{"director", "dr", "--vip", "10.0.0.100/24", "--dev", "eth1"},
		{"director", "dr", "--vip", "10.0.0.100/24", "--dev", "eth1", "--vrrp"},
		{"director", "ecmp", "--vip", "192.0.2.10"},
		{"realserver", "dr", "--vip", "10.0.0.100", "--dev", "eth0"},
		{"realserver", "tun", "--vip", "10.0.0.100", "--dev", "eth0"},
		{"realserver", "tun", "--vip", "2001:db8::100"},
		{"realserver", "nat", "--gateway", "172.16.0.1"},
		{"director", "nat", "--vip", "2001:db8::5/64", "--dev", "eth1", "--rs-net", "2001:db8:1::/64"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			th := newTestHost(t)
			th.modules.Available["ip_vs_ftp"] = true
			if args[1] == "tun" && args[0] == "realserver" {
				th.setSysctl("net/ipv4/conf/all/rp_filter", "1")
			}
			check := append([]string{"check"}, args...)
			out, _, code := th.run(check...)
			rep := parseCheck(t, out)
			if code != 1 || len(rep.rows) == 0 {
				t.Fatalf("check on an unprepared host: exit %d\n%s", code, out)
			}
			seen := map[string]bool{}
			for _, r := range rep.rows {
				if seen[r.check] {
					t.Errorf("two lines check %q", r.check)
				}
				seen[r.check] = true
				for _, cmd := range []string{"sysctl -w", "ip address", "ip link", "ip route", "iptables -", "modprobe", " -A ", "-j "} {
					if strings.Contains(r.check, cmd) {
						t.Errorf("line %q repeats a command (%q) instead of saying what it checks", r.check, cmd)
					}
				}
				if r.status == "ok" || r.status == statusInfo {
					continue
				}
				if len(commands(rep.fixes[r.check+" ("+r.status+")"])) == 0 {
					t.Errorf("no command fixes %q (%s):\n%s", r.check, r.status, out)
				}
			}
			if args[1] == "ecmp" {
				return // the services are ipvsadm's business
			}
			_, fix, ok := strings.Cut(out, "To fix the settings, run:\n  ")
			fix, _, _ = strings.Cut(fix, "\n")
			if !ok || !strings.HasPrefix(fix, "lvsprep ") {
				t.Fatalf("no lvsprep command in:\n%s", out)
			}
			th.mustRun(strings.Fields(strings.TrimPrefix(fix, "lvsprep "))...)
			if out := th.mustRun(check...); !strings.Contains(out, "Everything is in place.") {
				t.Errorf("check after %s:\n%s", fix, out)
			}
		})
	}
}

// TestNotRootIsToldRootCan: a user other than root is told, in these
// words, that root can do what failed, instead of the low-level error:
// changing the host, reading the state directory, reading iptables.
func TestNotRootIsToldRootCan(t *testing.T) {
	th := newTestHost(t)
	nat := []string{"director", "nat", "--vip", "202.103.106.5/24", "--dev", "eth1", "--rs-net", "172.16.0.0/24"}
	th.mustRun(nat...) // as root: the state directory is root's, mode 0700
	th.root, th.UID = false, 65534
	th.rules4.Faults["exists"] = fmt.Errorf("iptables v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root): %w", fs.ErrPermission)
	stateMsg := "lvsprep: you must be root to read the state in " + th.stateDir + "\n"
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{nat, "lvsprep: you must be root to change the host: "},
		{[]string{"director", "nat", "--vip", "202.103.106.5", "--undo"}, "lvsprep: you must be root to change the host: "},
		{[]string{"director", "nat", "--vip", "202.103.106.5", "--undo", "--dry-run"}, stateMsg},
		{[]string{"status"}, stateMsg},
	} {
		_, errOut, code := th.run(tc.args...)
		if code != 1 || !strings.HasPrefix(errOut, tc.stderr) {
			t.Errorf("lvsprep %s as a user: exit %d, stderr %q; want 1, %q", strings.Join(tc.args, " "), code, errOut, tc.stderr)
		}
	}
	out, errOut, code := th.run(append([]string{"check"}, nat...)...)
	rep := parseCheck(t, out)
	rule := "masquerading: 172.16.0.0/24 going elsewhere (nat POSTROUTING)"
	if code != 1 || errOut != "" || !slices.ContainsFunc(rep.rows, func(r checkRow) bool {
		return r.check == rule && r.status == "unknown" && r.have == "unknown: you must be root to read it"
	}) {
		t.Errorf("check as a user: exit %d, stderr %q\n%s", code, errOut, out)
	}
	if got := rep.fixes[rule+" (unknown)"]; !slices.Equal(got, []string{"lvsprep check " + strings.Join(nat, " ")}) {
		t.Errorf("fix of the unreadable rule: %q\n%s", got, out)
	}
	if !strings.Contains(out, "Whether lvsprep applied it is unknown: you must be root to read the state in "+th.stateDir) {
		t.Errorf("check as a user does not say why it cannot tell whether lvsprep applied it:\n%s", out)
	}
}

func TestStatus(t *testing.T) {
	th := newTestHost(t)
	if out := th.mustRun("status"); !strings.Contains(out, "No profile applied") {
		t.Errorf("status on a fresh host: %q", out)
	}
	th.mustRun("rs", "nat", "--gateway", "172.16.0.1")
	th.mustRun("rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0")
	out := th.mustRun("status")
	for _, w := range []string{"| realserver dr  | --vip 10.0.0.100 --dev eth0 | 5 of 6", "| realserver nat | --gateway 172.16.0.1",
		"  lvsprep realserver dr --vip 10.0.0.100 --undo\n", "  lvsprep realserver nat --gateway 172.16.0.1 --undo\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("status lacks %q:\n%s", w, out)
		}
	}
}

func TestStateFileIsReadableJSON(t *testing.T) {
	th := newTestHost(t)
	th.mustRun("rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0")
	b, err := os.ReadFile(statePath(th.stateDir, "realserver-dr-10.0.0.100"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("state is not JSON: %v\n%s", err, b)
	}
	if !strings.Contains(string(b), `"sysctl": "net/ipv4/conf/eth0/arp_ignore"`) || !strings.Contains(string(b), `"prior": "0"`) {
		t.Errorf("state lacks the sysctl record with its prior value:\n%s", b)
	}
	fi, _ := os.Stat(th.stateDir)
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("state directory mode %v, want 0700", fi.Mode().Perm())
	}
}

func TestVersionAndHelp(t *testing.T) {
	th := newTestHost(t)
	out, _, code := th.run("--version")
	if code != 0 || !strings.HasPrefix(out, "lvsprep ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	out, _, code = th.run("--help")
	if code != 0 || !strings.Contains(out, "realserver (rs) tun") {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
	_, errOut, code := th.run()
	if code != 2 || errOut == "" {
		t.Errorf("no command: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = th.run("check", "rs", "dr", "--vip", "10.0.0.1", "--dev", "eth0", "--undo")
	if code != 2 || !strings.Contains(errOut, "check takes neither") {
		t.Errorf("check --undo: exit %d, stderr %q", code, errOut)
	}
}

func TestModulesAreHandedOverAcrossNamespaces(t *testing.T) {
	th := newTestHost(t)
	// Two network namespaces have their own state directories side by side
	// (see netnsid.Dir); the kernel's modules are shared by both.
	nsA, nsB := filepath.Join(th.stateDir, "netns-a"), filepath.Join(th.stateDir, "netns-b")
	runIn := func(dir string, args ...string) string {
		t.Helper()
		var o, e bytes.Buffer
		h := *th.Host
		if code := Main(append([]string{"lvsprep", "--state-dir", dir}, args...), nil, &o, &e, &h); code != 0 {
			t.Fatalf("lvsprep %v: exit %d: %s", args, code, e.String())
		}
		return o.String()
	}
	runIn(nsA, "rs", "tun", "--vip", "10.0.0.100")
	runIn(nsB, "rs", "tun", "--vip", "10.0.0.101")
	out := runIn(nsA, "rs", "tun", "--vip", "10.0.0.100", "--undo")
	if !th.modules.Present["ipip"] {
		t.Fatalf("undo in one namespace unloaded ipip that the other still uses:\n%s", out)
	}
	if !strings.Contains(out, "kept      module ipip: realserver tun --vip 10.0.0.101 (in "+nsB+") still needs it") {
		t.Errorf("undo output:\n%s", out)
	}
	if !strings.Contains(out, "reverted  sysctl -w net.ipv4.conf.all.arp_ignore=0") {
		t.Errorf("a namespace's own sysctls must not be handed to another namespace:\n%s", out)
	}
	runIn(nsB, "rs", "tun", "--vip", "10.0.0.101", "--undo")
	if th.modules.Present["ipip"] {
		t.Error("ipip still loaded after both namespaces undid their profiles")
	}
}
