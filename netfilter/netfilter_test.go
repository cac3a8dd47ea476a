package netfilter

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
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

func TestRouteArgs(t *testing.T) {
	r := Route{Gateway: netip.MustParseAddr("192.0.2.1"), Dev: "eth0", Metric: 100, Src: netip.MustParseAddr("192.0.2.7"), Protocol: 16}
	if got, want := r.String(), "default via 192.0.2.1 dev eth0 metric 100 src 192.0.2.7 proto dhcp"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if (Route{Gateway: netip.MustParseAddr("2001:db8::1")}).Family() != IPv6 {
		t.Error("IPv6 gateway gives an IPv4 route")
	}
}
