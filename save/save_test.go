package save_test

import (
	"bytes"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/list"
	"github.com/lvskit/lvskit/ipvsadm/list/listtest"
	"github.com/lvskit/lvskit/names"
	"github.com/lvskit/lvskit/save"
)

func resolver() *names.Resolver {
	return names.NewResolverFiles(filepath.Join("..", "testscripts", "golden", "hosts"), filepath.Join("..", "names", "testdata", "services"), "")
}

func svc(proto ipvs.Protocol, addr string, port uint16) ipvs.Service {
	a := netip.MustParseAddr(addr)
	s := ipvs.Service{Family: ipvs.AFInet, Protocol: proto, Addr: a, Port: port, Scheduler: "wlc", Netmask: 0xffffffff}
	if a.Is6() {
		s.Family, s.Netmask = ipvs.AFInet6, 128
	}
	return s
}

func dst(addr string, port uint16, fwd ipvs.FwdMethod) *ipvs.DestinationEntry {
	a := netip.MustParseAddr(addr)
	d := &ipvs.DestinationEntry{Destination: ipvs.Destination{Family: ipvs.AFInet, Addr: a, Port: port, FwdMethod: fwd, Weight: 1}}
	if a.Is6() {
		d.Family = ipvs.AFInet6
	}
	return d
}

// kernelOrder serves entries in the given order (already sorted here).
func kernelOrder(entries ...*listtest.Entry) *listtest.Client {
	t := listtest.New()
	t.Services = entries
	return &listtest.Client{T: t}
}

func write(t *testing.T, c ipvs.Reader, o list.Options) string {
	t.Helper()
	var b bytes.Buffer
	if err := save.Write(&b, c, o); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestServiceRules(t *testing.T) {
	pers := svc(ipvs.ProtoUDP, "10.0.0.2", 5060)
	pers.Flags, pers.Timeout, pers.PEName, pers.Netmask = ipvs.FlagPersistent|ipvs.FlagOnePacket, 300, "sip", 0xffff0000
	nonPers := svc(ipvs.ProtoTCP, "10.0.0.2", 5061)
	nonPers.PEName, nonPers.Netmask = "sip", 0xffffff00 // PE saved, mask not
	emptyFlags := svc(ipvs.ProtoTCP, "10.0.0.9", 80)
	emptyFlags.Scheduler, emptyFlags.Flags = "mh", ipvs.FlagSched3
	fw := ipvs.Service{Family: ipvs.AFInet6, FWMark: 4294967295, Scheduler: "sh", Flags: ipvs.FlagPersistent | ipvs.FlagSched1 | ipvs.FlagSched2, Timeout: 600, Netmask: 64}
	sctp := svc(ipvs.ProtoSCTP, "10.0.0.2", 5060)
	other := svc(99, "10.0.0.2", 5060)
	c := kernelOrder(&listtest.Entry{Svc: pers}, &listtest.Entry{Svc: nonPers}, &listtest.Entry{Svc: emptyFlags},
		&listtest.Entry{Svc: fw}, &listtest.Entry{Svc: sctp}, &listtest.Entry{Svc: other})
	got := write(t, c, list.Options{Numeric: true})
	// Sorted: fwmark -1 first (wrapping compare), then by protocol.
	want := "-A -f -1 -6 -s sh -p 600 -M 64 -b sh-fallback,sh-port\n" +
		"-A -t 10.0.0.2:5061 -s wlc --pe sip\n" +
		"-A -t 10.0.0.9:80 -s mh -b \n" +
		"-A -u 10.0.0.2:5060 -s wlc -p 300 -M 255.255.0.0 --pe sip -o\n" +
		"-A --xxx-service 10.0.0.2:5060 -s wlc\n" +
		"-A --sctp-service 10.0.0.2:5060 -s wlc\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestDestinationRules(t *testing.T) {
	s := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	local := dst("127.0.0.1", 80, ipvs.FwdLocal)
	route := dst("10.1.1.2", 80, ipvs.FwdRoute)
	route.Weight, route.UThreshold, route.LThreshold = 0, 100, 50 // thresholds are not saved
	masq := dst("10.1.1.3", 8080, ipvs.FwdMasq)
	masq.Weight = 2147483647
	ipip := dst("10.1.1.4", 80, ipvs.FwdTunnel)
	gue := dst("10.1.1.5", 80, ipvs.FwdTunnel)
	gue.TunType, gue.TunPort, gue.TunFlags = ipvs.TunGUE, 6080, ipvs.TunFlagRemCsum
	gre := dst("10.1.1.6", 80, ipvs.FwdTunnel)
	gre.TunType, gre.TunFlags = ipvs.TunGRE, ipvs.TunFlagNoCsum
	unknown := dst("10.1.1.7", 80, ipvs.FwdTunnel)
	unknown.TunType = 9
	v6 := dst("2001:db8::a0", 80, ipvs.FwdTunnel)
	odd := dst("10.1.1.8", 80, 6)
	c := kernelOrder(&listtest.Entry{Svc: s, Dests: []*ipvs.DestinationEntry{local, route, masq, ipip, gue, gre, unknown, v6, odd}})
	got := write(t, c, list.Options{Numeric: true})
	want := "-A -t 10.0.0.1:80 -s wlc\n" +
		"-a -t 10.0.0.1:80 -r 10.1.1.2:80 -g -w 0\n" +
		"-a -t 10.0.0.1:80 -r 10.1.1.3:8080 -m -w 2147483647\n" +
		"-a -t 10.0.0.1:80 -r 10.1.1.4:80 -i -w 1 --tun-type ipip\n" +
		"-a -t 10.0.0.1:80 -r 10.1.1.5:80 -i -w 1 --tun-type gue --tun-port 6080 --tun-remcsum\n" +
		"-a -t 10.0.0.1:80 -r 10.1.1.6:80 -i -w 1 --tun-type gre --tun-nocsum\n" +
		"-a -t 10.0.0.1:80 -r 10.1.1.7:80 -i -w 1\n" +
		"-a -t 10.0.0.1:80 -r 10.1.1.8:80 (null) -w 1\n" +
		"-a -t 10.0.0.1:80 -r [2001:db8::a0]:80 -i -w 1 --tun-type ipip\n" +
		"-a -t 10.0.0.1:80 -r 127.0.0.1:80 -g -w 1\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestNames: without -n, names replace addresses and ports with only the
// 59-character cut (no listing column cuts); fwmark destinations keep
// numeric ports.
func TestNames(t *testing.T) {
	s := svc(ipvs.ProtoTCP, "10.0.0.3", 80)
	fw := ipvs.Service{Family: ipvs.AFInet, FWMark: 1, Scheduler: "wlc", Netmask: 0xffffffff}
	c := kernelOrder(
		&listtest.Entry{Svc: s, Dests: []*ipvs.DestinationEntry{dst("192.168.10.2", 80, ipvs.FwdMasq)}},
		&listtest.Entry{Svc: fw, Dests: []*ipvs.DestinationEntry{dst("192.168.10.1", 8080, ipvs.FwdMasq)}},
	)
	got := write(t, c, list.Options{Resolver: resolver()})
	want := "-A -t an-extremely-long-virtual-service-hostname-for-testing-trun -s wlc\n" +
		"-a -t an-extremely-long-virtual-service-hostname-for-testing-trun -r a-very-long-real-server-hostname-that-exceeds-the-columns.e -m -w 1\n" +
		"-A -f 1 -s wlc\n" +
		"-a -f 1 -r rs1.example.com:8080 -m -w 1\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

type failing struct {
	*listtest.Client
	services, dests error
}

func (f failing) Services() ([]ipvs.ServiceEntry, error) {
	if f.services != nil {
		return nil, f.services
	}
	return f.Client.Services()
}

func (f failing) Destinations(s ipvs.Service) ([]ipvs.DestinationEntry, error) {
	if f.dests != nil && s.Port == 443 {
		return nil, f.dests
	}
	return f.Client.Destinations(s)
}

// TestErrors: kernel errors come back unchanged, after the rules written
// so far (no header is ever written).
func TestErrors(t *testing.T) {
	c := kernelOrder(&listtest.Entry{Svc: svc(ipvs.ProtoTCP, "10.0.0.1", 80)}, &listtest.Entry{Svc: svc(ipvs.ProtoTCP, "10.0.0.1", 443)})
	var b bytes.Buffer
	if err := save.Write(&b, failing{Client: c, services: unix.EPERM}, list.Options{Numeric: true}); !errors.Is(err, unix.EPERM) || b.Len() != 0 {
		t.Errorf("services: %v %q", err, b.String())
	}
	b.Reset()
	err := save.Write(&b, failing{Client: c, dests: unix.ESRCH}, list.Options{Numeric: true})
	if !errors.Is(err, unix.ESRCH) || b.String() != "-A -t 10.0.0.1:80 -s wlc\n" {
		t.Errorf("destinations: %v %q", err, b.String())
	}
}
