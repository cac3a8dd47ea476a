//go:build lab

package bench

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/bench/benchdata"
)

// A layout is how a table's services are addressed. The kernel files
// services in 256 hash buckets chosen by the low 8 bits of the address
// mixed with the port and protocol (fwmark services by the mark), and
// every request that names a service walks its bucket's chain; so the
// layouts differ in what the kernel does, not only in what the tools do.
//
// All addresses lie within 10.0.0.0/8, 192.168.0.0/16 and 2001:db8::/32,
// where ipvsadm's wrapping sort comparator is a true order: -Sn sorts
// identically whatever the kernel's dump order, so tables restored by
// different tools save identical text.
type layout string

const (
	// spread: 10.0.x.y:80, y = 1…250, over the buckets.
	spread layout = "spread"
	// shared: 10.x.y.1:80, every VIP equal in its low byte, one port: one
	// bucket holds every service.
	shared layout = "shared"
	// ports: 10.0.0.1 with ports 1…N.
	ports layout = "ports"
	// fwmark: -f 1…N.
	fwmark layout = "fwmark"
	// ipv6: [2001:db8::x:y]:80.
	ipv6 layout = "ipv6"
)

// service is one virtual service of a benchmark table.
type service struct {
	fwmark uint32
	v6     bool
	addr   netip.AddrPort // zero for fwmark services
	dests  []netip.AddrPort
}

// table is a benchmark table: a layout, a size and destinations per
// service (masquerading, weight 1, scheduler wlc).
type table struct {
	layout   layout
	dests    int
	services []service
}

func (t *table) String() string {
	return fmt.Sprintf("%s %s×%d", t.layout, benchdata.Thousands(len(t.services)), t.dests)
}

// spec is the table's name for a floor child: layout:services:dests.
func (t *table) spec() string {
	return fmt.Sprintf("%s:%d:%d", t.layout, len(t.services), t.dests)
}

func parseTableSpec(s string) (*table, error) {
	f := strings.Split(s, ":")
	if len(f) != 3 {
		return nil, fmt.Errorf("table %q: want layout:services:dests", s)
	}
	n, err1 := strconv.Atoi(f[1])
	d, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("table %q: bad numbers", s)
	}
	return newTable(layout(f[0]), n, d)
}

// newTable builds the table of n services with d destinations each.
// Destinations are 192.168.j.y:80 (j = 1…d, y following the service), or
// [2001:db8:1::j:y]:80 for IPv6 services.
func newTable(l layout, n, d int) (*table, error) {
	if n > 60000 || d > 250 {
		return nil, fmt.Errorf("table %s %d×%d: too large for the address plan", l, n, d)
	}
	t := &table{layout: l, dests: d, services: make([]service, n)}
	for i := range t.services {
		s := &t.services[i]
		x, y := i/250, i%250+1
		switch l {
		case spread:
			s.addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(x), byte(y)}), 80)
		case shared:
			s.addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), 80)
		case ports:
			s.addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, 1}), uint16(i+1))
		case fwmark:
			s.fwmark = uint32(i + 1)
		case ipv6:
			s.v6 = true
			s.addr = netip.AddrPortFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 12: byte(x >> 8), 13: byte(x), 15: byte(y)}), 80)
		default:
			return nil, fmt.Errorf("unknown layout %q", l)
		}
		s.dests = make([]netip.AddrPort, d)
		for j := range d {
			if l == ipv6 {
				s.dests[j] = netip.AddrPortFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 13: byte(j + 1), 15: byte(y)}), 80)
			} else {
				s.dests[j] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 168, byte(j + 1), byte(y)}), 80)
			}
		}
	}
	return t, nil
}

// rules is the table as ipvsadm -R input, in the order and form ipvsadm
// -Sn writes (one -A line, then its -a lines).
func (t *table) rules() []byte {
	b, _ := t.rulesChanged(0)
	return b
}

// rulesChanged is rules with one destination in every `every` changed,
// if every > 0, alternately: one is replaced by a new one (see replaced),
// the next gets weight 5. It also returns the number of
// destinations to add, remove or reweight.
func (t *table) rulesChanged(every int) ([]byte, int) {
	var b bytes.Buffer
	k, changes := 0, 0
	for i := range t.services {
		s := &t.services[i]
		var svc string
		switch {
		case s.fwmark != 0:
			svc = "-f " + strconv.Itoa(int(s.fwmark))
		default:
			svc = "-t " + s.addr.String()
		}
		fmt.Fprintf(&b, "-A %s -s wlc\n", svc)
		for _, d := range s.dests {
			k++
			weight := 1
			if every > 0 && k%every == 0 {
				if (k/every)%2 == 0 {
					weight = 5
					changes++
				} else {
					d = replaced(d)
					changes += 2
				}
			}
			fmt.Fprintf(&b, "-a %s -r %s -m -w %d\n", svc, d, weight)
		}
	}
	return b.Bytes(), changes
}

// replaced is the destination that replaces d (192.168.j.y or
// [2001:db8:1::j:y]) in a changed table: j+100 in place of j, a new
// address for every table newTable makes with at most 155 destinations.
func replaced(d netip.AddrPort) netip.AddrPort {
	if d.Addr().Is4() {
		a := d.Addr().As4()
		a[2] += 100
		return netip.AddrPortFrom(netip.AddrFrom4(a), d.Port())
	}
	a := d.Addr().As16()
	a[13] += 100
	return netip.AddrPortFrom(netip.AddrFrom16(a), d.Port())
}

// writeChanged writes tab's restore input with one destination in 100
// changed (see rulesChanged) into dir: the input of lvsctl apply's
// benchmarks. It returns the path and the number of changes.
func writeChanged(t *testing.T, dir string, tab *table) (string, int) {
	t.Helper()
	if tab.dests > 155 {
		t.Fatalf("%s: a changed copy needs at most 155 destinations a service (see replaced)", tab)
	}
	b, changes := tab.rulesChanged(100)
	p := filepath.Join(dir, "changed-"+strings.ReplaceAll(tab.spec(), ":", "-"))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, changes
}

// writeTable writes the table's restore input into dir.
func writeTable(t *testing.T, dir string, tab *table) string {
	t.Helper()
	p := filepath.Join(dir, strings.ReplaceAll(tab.spec(), ":", "-"))
	if err := os.WriteFile(p, tab.rules(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
