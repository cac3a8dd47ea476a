package lvsprep

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/netfilter/netfiltertest"
)

var ecmpArgs = []string{"director", "ecmp", "--vip", "192.0.2.10"}

func TestDirectorECMPApplyIdempotentUndo(t *testing.T) {
	th := newTestHost(t)
	before := th.snapshot()
	out := th.mustRun(ecmpArgs...)
	for _, w := range []string{
		"changed   modprobe ip_vs\n", "changed   modprobe ip_vs_mh\n",
		"changed   sysctl -w net.ipv4.vs.sloppy_tcp=1\n", "changed   sysctl -w net.ipv4.vs.sloppy_sctp=1\n",
		"changed   sysctl -w net.ipv4.vs.schedule_icmp=1\n", "in place  sysctl -w net.ipv4.vs.conntrack=0\n",
		"in place  ip link set dev lo up\n", "changed   ip address add 192.0.2.10/32 dev lo\n",
		"changed   sysctl -w net.ipv4.conf.all.arp_ignore=1\n", "changed   sysctl -w net.ipv4.conf.all.arp_announce=2\n",
		"changed   sysctl -w net.ipv4.conf.all.accept_local=1\n",
		"changed   iptables -t raw -A PREROUTING -d 192.0.2.10/32 -j CT --notrack\n",
		"director ecmp: 10 changed, 2 already in place", "Undo with: lvsprep director ecmp --vip 192.0.2.10 --undo",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("apply output lacks %q:\n%s", w, out)
		}
	}
	applied := th.snapshot()
	if out := th.mustRun(ecmpArgs...); !strings.Contains(out, "0 changed, 12 already in place") || th.snapshot() != applied {
		t.Errorf("second apply changed something:\n%s", out)
	}
	th.mustRun("director", "ecmp", "--vip", "192.0.2.10", "--undo")
	if after := th.snapshot(); after != before {
		t.Errorf("undo did not restore exactly:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestDirectorECMPOnADummyAndIPv6(t *testing.T) {
	th := newTestHost(t)
	th.links.Links["vip0"] = &netfiltertest.FakeLink{}
	before := th.snapshot()
	th.mustRun("director", "ecmp", "--vip", "2001:db8::10", "--dev", "vip0")
	if l := th.links.Links["vip0"]; !l.Up || !slices.Contains(l.Addrs, netip.MustParsePrefix("2001:db8::10/128")) {
		t.Errorf("vip0 = %+v", l)
	}
	if got := th.rules6.Rules["raw/PREROUTING"]; !slices.Equal(got, []string{"-d 2001:db8::10/128 -j CT --notrack"}) {
		t.Errorf("ip6tables raw PREROUTING = %q", got)
	}
	if got := th.sysctl("net/ipv4/conf/all/arp_ignore"); got != "0" {
		t.Errorf("an IPv6 VIP changed ARP settings: %s", got)
	}
	th.mustRun("director", "ecmp", "--vip", "2001:db8::10", "--undo")
	if th.snapshot() != before {
		t.Error("undo did not restore exactly")
	}
	if _, errOut, code := th.run("director", "ecmp", "--vip", "192.0.2.10/24"); code != 2 || !strings.Contains(errOut, "host address (/32)") {
		t.Errorf("a subnet VIP: exit %d, %q", code, errOut)
	}
}

func addService(t *testing.T, th *testHost, port uint16, sched string, flags ipvs.ServiceFlags, fwd ...ipvs.FwdMethod) ipvs.Service {
	t.Helper()
	s := ipvs.Service{Family: 2, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("192.0.2.10"), Port: port,
		Scheduler: sched, Flags: flags, Netmask: 0xffffffff}
	if err := th.ipvs.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}); err != nil {
		t.Fatal(err)
	}
	for i, f := range fwd {
		d := ipvs.Destination{Family: 2, Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(2 + i)}), Port: port, FwdMethod: f, Weight: 1}
		if err := th.ipvs.Exec(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestCheckDirectorECMPServices: check reads the services on the VIP
// through IPVS and says why each one that is not mh with mh-port and DR or
// TUN breaks an ECMP group.
func TestCheckDirectorECMPServices(t *testing.T) {
	th := newTestHost(t)
	check := append([]string{"check"}, ecmpArgs...)
	th.mustRun(ecmpArgs...)
	out, _, code := th.run(check...)
	if code != 1 || !strings.Contains(out, "| missing | a service on 192.0.2.10 ") || !strings.Contains(out, "ipvsadm -A -t 192.0.2.10:80 -s mh -b mh-port") {
		t.Errorf("check without services: exit %d\n%s", code, out)
	}

	addService(t, th, 80, "mh", ipvs.FlagSched2, ipvs.FwdRoute, ipvs.FwdTunnel)
	out = th.mustRun(check...)
	if !strings.Contains(out, "| ok     | service -t 192.0.2.10:80 uses mh with mh-port, DR or TUN ") || !strings.Contains(out, "mh, mh-port, 2 of 2 real servers by DR or TUN") {
		t.Errorf("check with a good service:\n%s", out)
	}

	addService(t, th, 443, "wrr", 0, ipvs.FwdRoute)
	addService(t, th, 8080, "mh", ipvs.FlagSched1, ipvs.FwdRoute)
	addService(t, th, 8443, "mh", ipvs.FlagSched2, ipvs.FwdMasq)
	out, _, code = th.run(check...)
	if code != 1 {
		t.Errorf("check with bad services: exit %d", code)
	}
	for _, w := range []string{
		"| wrong  | service -t 192.0.2.10:443 uses mh with mh-port, DR or TUN ", "| scheduler wrr ",
		"-t 192.0.2.10:443 uses wrr: each director would choose its own real server",
		"ipvsadm -E -t 192.0.2.10:443 -s mh -b mh-port",
		"| wrong  | service -t 192.0.2.10:8080 uses mh with mh-port, DR or TUN ", "| mh without mh-port ",
		"-t 192.0.2.10:8080 hashes the client address alone",
		"| wrong  | service -t 192.0.2.10:8443 uses mh with mh-port, DR or TUN ", "| 10.0.0.2:8443 by NAT ",
		"its replies must come back through the director that forwarded it",
		"ipvsadm -e -t 192.0.2.10:8443 -r 10.0.0.2:8443 -g",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("check lacks %q:\n%s", w, out)
		}
	}
	// Services on other addresses are not this VIP's business.
	th2 := newTestHost(t)
	th2.mustRun(ecmpArgs...)
	addService(t, th2, 80, "mh", ipvs.FlagSched2, ipvs.FwdRoute)
	other := ipvs.Service{Family: 2, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("192.0.2.99"), Port: 80, Scheduler: "rr", Netmask: 0xffffffff}
	th2.ipvs.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &other})
	if out, _, code := th2.run(check...); code != 0 || strings.Contains(out, "192.0.2.99") {
		t.Errorf("check looked beyond the VIP: exit %d\n%s", code, out)
	}
}

func TestDirectorECMPDryRun(t *testing.T) {
	th := newTestHost(t)
	th.root = false
	out := th.mustRun(append([]string{"--dry-run"}, ecmpArgs...)...)
	want := "# director ecmp --vip 192.0.2.10 --dev lo (dry run: nothing is changed)\n" +
		"modprobe ip_vs\nmodprobe ip_vs_mh\n" +
		"sysctl -w net.ipv4.vs.sloppy_tcp=1\nsysctl -w net.ipv4.vs.sloppy_sctp=1\nsysctl -w net.ipv4.vs.schedule_icmp=1\n" +
		"sysctl -w net.ipv4.vs.conntrack=0\n# in place: ip link set dev lo up\nip address add 192.0.2.10/32 dev lo\n" +
		"sysctl -w net.ipv4.conf.all.arp_ignore=1\nsysctl -w net.ipv4.conf.all.arp_announce=2\n" +
		"sysctl -w net.ipv4.conf.all.accept_local=1\n" +
		"iptables -t raw -A PREROUTING -d 192.0.2.10/32 -j CT --notrack\n"
	if out != want {
		t.Errorf("dry run:\n%s\nwant:\n%s", out, want)
	}
}
