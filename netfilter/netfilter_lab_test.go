//go:build lab

package netfilter

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/lvskit/lvskit/lab/labtest"
)

// The real implementations against the lab's kernel, in a fresh network
// namespace each.

func TestLabNetlink(t *testing.T) {
	labtest.Netns(t)
	if r := labtest.Sh(t, "ip link add eth0 type dummy && ip link add eth1 type dummy && ip link set eth1 up"); r.Code != 0 {
		t.Fatalf("%+v", r)
	}
	var nl Netlink
	if _, err := nl.IsUp("eth9"); !errors.Is(err, ErrNoLink) {
		t.Errorf("IsUp(eth9): %v, want ErrNoLink", err)
	}
	names, err := nl.Names()
	if err != nil || !slices.Contains(names, "eth0") || !slices.Contains(names, "lo") {
		t.Errorf("Names = %v, %v", names, err)
	}
	if up, _ := nl.IsUp("eth0"); up {
		t.Error("eth0 is up before SetUp")
	}
	if err := nl.SetUp("eth0", true); err != nil {
		t.Fatal(err)
	}
	if up, _ := nl.IsUp("eth0"); !up {
		t.Error("eth0 is down after SetUp")
	}
	for _, p := range []string{"192.0.2.2/24", "10.0.0.100/32", "2001:db8::100/128"} {
		pfx := netip.MustParsePrefix(p)
		if err := nl.AddAddr("eth0", pfx); err != nil {
			t.Fatal(err)
		}
		if addrs, _ := nl.Addrs("eth0"); !slices.Contains(addrs, pfx) {
			t.Errorf("Addrs after adding %s: %v", pfx, addrs)
		}
		if err := nl.AddAddr("eth0", pfx); err == nil {
			t.Errorf("adding %s twice succeeded", pfx)
		}
	}
	if err := nl.DelAddr("eth0", netip.MustParsePrefix("10.0.0.100/32")); err != nil {
		t.Fatal(err)
	}
	if addrs, _ := nl.Addrs("eth0"); slices.Contains(addrs, netip.MustParsePrefix("10.0.0.100/32")) {
		t.Error("address still there after DelAddr")
	}

	// Routes come back with every attribute that undo needs.
	if err := nl.AddAddr("eth1", netip.MustParsePrefix("198.51.100.2/24")); err != nil {
		t.Fatal(err)
	}
	routes := []Route{
		{Gateway: netip.MustParseAddr("192.0.2.1"), Dev: "eth0", Metric: 100, Src: netip.MustParseAddr("192.0.2.2"), Protocol: 16},
		{Gateway: netip.MustParseAddr("198.51.100.1"), Dev: "eth1", Metric: 200, Protocol: 4},
	}
	for _, r := range routes {
		if err := nl.AddRoute(r); err != nil {
			t.Fatalf("AddRoute(%s): %v", r, err)
		}
	}
	got, err := nl.DefaultRoutes(IPv4)
	if err != nil || !slices.Equal(got, routes) {
		t.Errorf("DefaultRoutes = %v, %v; want %v", got, err, routes)
	}
	for _, r := range routes {
		if err := nl.DelRoute(r); err != nil {
			t.Fatalf("DelRoute(%s): %v", r, err)
		}
	}
	if got, _ := nl.DefaultRoutes(IPv4); len(got) != 0 {
		t.Errorf("routes left: %v", got)
	}
	plain := Route{Gateway: netip.MustParseAddr("192.0.2.1")}
	if err := nl.AddRoute(plain); err != nil {
		t.Fatal(err)
	}
	if got, _ := nl.DefaultRoutes(IPv4); len(got) != 1 || got[0].Dev != "eth0" || got[0].Protocol != 3 {
		t.Errorf("route added without device or protocol came back as %v, want dev eth0 proto boot", got)
	}
}

func TestLabProcSysIsPerNamespace(t *testing.T) {
	labtest.Netns(t)
	var s ProcSys
	if err := s.Set("net/ipv4/ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get("net/ipv4/ip_forward"); err != nil || v != "1" {
		t.Errorf("ip_forward = %q, %v", v, err)
	}
	if _, err := s.Get("net/ipv4/conf/nonexistent0/rp_filter"); err == nil {
		t.Error("reading a sysctl of a missing interface succeeded")
	}
}

func TestLabIPTables(t *testing.T) {
	labtest.Netns(t)
	ipt, err := NewIPTables(IPv4)
	if err != nil {
		t.Fatal(err)
	}
	rule := []string{"-m", "ipvs", "--vaddr", "10.0.0.100/32", "--vproto", "tcp", "--vport", "80", "--vmethod", "MASQ", "-j", "SNAT", "--to-source", "172.16.0.1"}
	if ok, err := ipt.Exists("nat", "POSTROUTING", rule...); err != nil || ok {
		t.Fatalf("Exists before Append: %t, %v", ok, err)
	}
	if err := ipt.Append("nat", "POSTROUTING", rule...); err != nil {
		t.Fatal(err)
	}
	if ok, err := ipt.Exists("nat", "POSTROUTING", rule...); err != nil || !ok {
		t.Errorf("Exists after Append: %t, %v", ok, err)
	}
	if err := ipt.Delete("nat", "POSTROUTING", rule...); err != nil {
		t.Fatal(err)
	}
	if err := ipt.Delete("nat", "POSTROUTING", rule...); err == nil {
		t.Error("deleting a missing rule succeeded")
	}
}
