package netfilter

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestProcSysGetSet(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "net/ipv4/conf/eth0.100/rp_filter"), "1\n")
	s := ProcSys{Root: root}
	name := SysctlPath("net", "ipv4", "conf", "eth0.100", "rp_filter")
	got, err := s.Get(name)
	if err != nil || got != "1" {
		t.Fatalf("Get(%s) = %q, %v; want \"1\", nil", name, got, err)
	}
	if err := s.Set(name, "2"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(root, "net/ipv4/conf/eth0.100/rp_filter"))
	if string(b) != "2\n" {
		t.Errorf("file holds %q after Set, want \"2\\n\"", b)
	}
}

func TestProcSysMissingParameter(t *testing.T) {
	s := ProcSys{Root: t.TempDir()}
	if _, err := s.Get("net/ipv4/vs/conntrack"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Get of a missing sysctl: %v, want os.ErrNotExist", err)
	}
	err := s.Set("net/ipv4/vs/conntrack", "1")
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Set of a missing sysctl: %v, want os.ErrNotExist", err)
	}
	if !strings.Contains(err.Error(), "net.ipv4.vs.conntrack") {
		t.Errorf("error %q does not name the sysctl in dotted form", err)
	}
}

func TestProcSysRejectsEscapes(t *testing.T) {
	s := ProcSys{Root: t.TempDir()}
	for _, name := range []string{"", "/etc/passwd", "net/../../etc", "net//ipv4", "net/./x"} {
		if _, err := s.Get(name); err == nil {
			t.Errorf("Get(%q) succeeded, want an error", name)
		}
		if err := s.Set(name, "1"); err == nil {
			t.Errorf("Set(%q) succeeded, want an error", name)
		}
	}
}

func TestSysctlName(t *testing.T) {
	for path, want := range map[string]string{
		"net/ipv4/ip_forward":               "net.ipv4.ip_forward",
		"net/ipv4/conf/eth0.100/arp_ignore": "net.ipv4.conf.eth0/100.arp_ignore",
		"net/ipv4/vs/conntrack":             "net.ipv4.vs.conntrack",
	} {
		if got := SysctlName(path); got != want {
			t.Errorf("SysctlName(%q) = %q, want %q", path, got, want)
		}
	}
}

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
	if _, err := f.IsUp("eth9"); !errors.Is(err, ErrNoLink) {
		t.Errorf("IsUp(eth9) error %v, want ErrNoLink", err)
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
	r := Route{Gateway: netip.MustParseAddr("172.16.0.1"), Dev: "eth0"}
	if err := f.AddRoute(r); err != nil {
		t.Fatal(err)
	}
	if err := f.AddRoute(Route{Gateway: netip.MustParseAddr("172.16.0.9")}); err == nil {
		t.Error("second default route with the same metric was accepted")
	}
	if rs, _ := f.DefaultRoutes(IPv6); len(rs) != 0 {
		t.Errorf("IPv6 default routes %v, want none", rs)
	}
	if err := f.DelRoute(r); err != nil {
		t.Fatal(err)
	}
}

func TestRouteArgs(t *testing.T) {
	r := Route{Gateway: netip.MustParseAddr("192.0.2.1"), Dev: "eth0", Metric: 100, Src: netip.MustParseAddr("192.0.2.7"), Protocol: 16}
	if got, want := r.String(), "default via 192.0.2.1 dev eth0 metric 100 src 192.0.2.7 proto dhcp"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if (Route{Gateway: netip.MustParseAddr("2001:db8::1")}).Family() != IPv6 {
		t.Error("IPv6 gateway gives an IPv4 route")
	}
}

func TestModuleLoaded(t *testing.T) {
	sys, mods := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(sys, "module/ip_vs/refcnt"), "0\n")
	writeFile(t, filepath.Join(mods, "modules.builtin"), "kernel/net/ipv4/ipip.ko\nkernel/drivers/net/dummy.ko\n")
	for name, want := range map[string]bool{"ip_vs": true, "ip-vs": true, "ipip": true, "dummy": true, "xt_ipvs": false} {
		got, err := ModuleLoaded(sys, mods, name)
		if err != nil || got != want {
			t.Errorf("ModuleLoaded(%s) = %t, %v; want %t", name, got, err, want)
		}
	}
	if _, err := ModuleLoaded(sys, mods, "../etc"); err == nil {
		t.Error("a module name with a slash was accepted")
	}
}
