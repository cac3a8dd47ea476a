package netfiltertest

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/lvskit/lvskit/netfilter"
)

func TestFakeIPTables(t *testing.T) {
	f := NewFakeIPTables()
	rule := []string{"-s", "10.0.0.0/8", "-j", "MASQUERADE"}
	if ok, _ := f.Exists("nat", "POSTROUTING", rule...); ok {
		t.Fatal("rule exists in an empty fake")
	}
	if err := f.Append("nat", "POSTROUTING", rule...); err != nil {
		t.Fatal(err)
	}
	if err := f.Insert("nat", "POSTROUTING", 1, "-j", "ACCEPT"); err != nil {
		t.Fatal(err)
	}
	got, _ := f.List("nat", "POSTROUTING")
	want := []string{"-P POSTROUTING ACCEPT", "-A POSTROUTING -j ACCEPT", "-A POSTROUTING -s 10.0.0.0/8 -j MASQUERADE"}
	if !slices.Equal(got, want) {
		t.Errorf("List = %q, want %q", got, want)
	}
	if ok, _ := f.Exists("nat", "POSTROUTING", rule...); !ok {
		t.Error("appended rule does not exist")
	}
	if ok, _ := f.Exists("filter", "POSTROUTING", rule...); ok {
		t.Error("rule exists in another table")
	}
	if err := f.Delete("nat", "POSTROUTING", rule...); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete("nat", "POSTROUTING", rule...); err == nil {
		t.Error("deleting a missing rule succeeded; iptables -D fails")
	}
	if err := f.Insert("nat", "POSTROUTING", 5, rule...); err == nil {
		t.Error("inserting past the end succeeded")
	}
	f.Faults["append"] = errors.New("boom")
	if err := f.Append("nat", "POSTROUTING", rule...); err == nil {
		t.Error("fault not injected")
	}
}

func TestFakeLinks(t *testing.T) {
	f := NewFakeLinks("eth0")
	if _, err := f.IsUp("eth9"); !errors.Is(err, netfilter.ErrNoLink) {
		t.Errorf("IsUp(eth9) error %v, want netfilter.ErrNoLink", err)
	}
	p := netip.MustParsePrefix("10.0.0.100/32")
	if err := f.AddAddr("lo", p); err != nil {
		t.Fatal(err)
	}
	if err := f.AddAddr("lo", p); err == nil {
		t.Error("adding a duplicate address succeeded")
	}
	addrs, _ := f.Addrs("lo")
	if !slices.Contains(addrs, p) {
		t.Errorf("Addrs(lo) = %v, missing %v", addrs, p)
	}
	if err := f.DelAddr("lo", p); err != nil {
		t.Fatal(err)
	}
	if err := f.DelAddr("lo", p); err == nil {
		t.Error("removing a missing address succeeded")
	}
	r := netfilter.Route{Gateway: netip.MustParseAddr("172.16.0.1"), Dev: "eth0"}
	if err := f.AddRoute(r); err != nil {
		t.Fatal(err)
	}
	if err := f.AddRoute(netfilter.Route{Gateway: netip.MustParseAddr("172.16.0.9")}); err == nil {
		t.Error("second default route with the same metric was accepted")
	}
	if rs, _ := f.DefaultRoutes(netfilter.IPv6); len(rs) != 0 {
		t.Errorf("netfilter.IPv6 default routes %v, want none", rs)
	}
	if err := f.DelRoute(r); err != nil {
		t.Fatal(err)
	}
}
