package names

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// goldenHosts is the /etc/hosts of the VM that produced the golden
// transcripts.
const goldenHosts = "../testscripts/golden/hosts"

func goldenResolver() *Resolver {
	return NewResolverFiles(goldenHosts, "testdata/services", "")
}

func TestParseInetAton(t *testing.T) {
	valid := map[string]string{
		"10.0.0.1":           "10.0.0.1",
		"10.1":               "10.0.0.1",
		"10.1.2":             "10.1.0.2",
		"0x0a000002":         "10.0.0.2",
		"0X0A000002":         "10.0.0.2",
		"167772163":          "10.0.0.3",
		"010.0.0.9":          "8.0.0.9",
		"0":                  "0.0.0.0",
		"00":                 "0.0.0.0",
		"255.255.255.255":    "255.255.255.255",
		"4294967295":         "255.255.255.255",
		"1.16777215":         "1.255.255.255",
		"1.2.65535":          "1.2.255.255",
		"0x7f.1":             "127.0.0.1",
		"10.0.0.1 junk":      "10.0.0.1",
		"10.0.0.1\t":         "10.0.0.1",
		"10.0.0.1\n":         "10.0.0.1",
		"0xff.0377.0.1":      "255.255.0.1",
		"1.2.3.0x0000000004": "1.2.3.4",
	}
	for in, want := range valid {
		got, ok := ParseInetAton(in)
		if !ok || got != netip.MustParseAddr(want) {
			t.Errorf("ParseInetAton(%q) = %v, %v; want %s", in, got, ok, want)
		}
	}
	invalid := []string{
		"", " 10.0.0.1", "+1.2.3.4", "-1", "1.2.3.4.5", "1.", "1..2", ".1",
		"256.0.0.1", "1.2.3.256", "1.2.65536", "1.16777216", "4294967296",
		"08", "09.1.1.1", "0x", "0x.1", "0xg", "1.2.3.4x", "1.2.3.4:80",
		"99999999999999999999999", "0x100000000", "vip1", "1.2.3.-4", "::1",
	}
	for _, in := range invalid {
		if got, ok := ParseInetAton(in); ok {
			t.Errorf("ParseInetAton(%q) = %v, want failure", in, got)
		}
	}
}

func TestLookupHost4(t *testing.T) {
	r := goldenResolver()
	for name, want := range map[string]string{
		"vip1.example.com": "10.0.0.1",
		"vip1":             "10.0.0.1",
		"VIP1":             "10.0.0.1",
		"Rs1.Example.Com":  "192.168.10.1",
		"localhost":        "127.0.0.1",
		"a-very-long-real-server-hostname-that-exceeds-the-columns.example.com": "192.168.10.2",
	} {
		got, ok := r.LookupHost4(name)
		if !ok || got != netip.MustParseAddr(want) {
			t.Errorf("LookupHost4(%q) = %v, %v; want %s", name, got, ok, want)
		}
	}
	// IPv6-only names, unknown names and numeric texts do not resolve.
	for _, name := range []string{"vip6.example.com", "rs6", "nosuch", "", "10.0.0.1.5", "2001:db8::1"} {
		if got, ok := r.LookupHost4(name); ok {
			t.Errorf("LookupHost4(%q) = %v, want failure", name, got)
		}
	}
}

func TestLookupAddr(t *testing.T) {
	r := goldenResolver()
	for addr, want := range map[string]string{
		"10.0.0.1":     "vip1.example.com",
		"10.0.0.2":     "vip2",
		"192.168.10.1": "rs1.example.com",
		"2001:db8::1":  "vip6.example.com",
		"2001:db8::a0": "rs6",
		"10.0.0.3":     "an-extremely-long-virtual-service-hostname-for-testing-truncation.example.org",
	} {
		got, ok := r.LookupAddr(netip.MustParseAddr(addr))
		if !ok || got != want {
			t.Errorf("LookupAddr(%s) = %q, %v; want %q", addr, got, ok, want)
		}
	}
	for _, addr := range []string{"10.0.0.9", "2001:db8::2", "::ffff:10.0.0.1"} {
		if got, ok := r.LookupAddr(netip.MustParseAddr(addr)); ok {
			t.Errorf("LookupAddr(%s) = %q, want failure", addr, got)
		}
	}
}

func TestFirstLineWins(t *testing.T) {
	dir := t.TempDir()
	hosts := filepath.Join(dir, "hosts")
	writeFile(t, hosts, "# comment 10.9.9.9 x\n10.0.0.5  first alias # trailing\n10.0.0.5 second\n10.0.0.6 alias other\n\t10.0.0.7\tTabbed\n")
	r := NewResolverFiles(hosts, "", "")
	if n, _ := r.LookupAddr(netip.MustParseAddr("10.0.0.5")); n != "first" {
		t.Errorf("LookupAddr(10.0.0.5) = %q, want first", n)
	}
	if a, _ := r.LookupHost4("alias"); a != netip.MustParseAddr("10.0.0.5") {
		t.Errorf("LookupHost4(alias) = %v, want 10.0.0.5", a)
	}
	if a, _ := r.LookupHost4("tabbed"); a != netip.MustParseAddr("10.0.0.7") {
		t.Errorf("LookupHost4(tabbed) = %v, want 10.0.0.7", a)
	}
	if _, ok := r.LookupHost4("trailing"); ok {
		t.Error("a name inside a comment resolved")
	}
}

func TestServices(t *testing.T) {
	r := goldenResolver()
	ports := []struct {
		name, proto string
		port        uint16
		ok          bool
	}{
		{"http", "tcp", 80, true},
		{"www", "tcp", 80, true},
		{"http", "udp", 0, false},
		{"http-alt", "tcp", 8080, true},
		{"webcache", "tcp", 8080, true},
		{"http-alt", "udp", 0, false},
		{"domain", "udp", 53, true},
		{"sip", "sctp", 0, false},
		{"HTTP", "tcp", 0, false},
		{"80", "tcp", 0, false},
	}
	for _, c := range ports {
		got, ok := r.ServicePort(c.name, c.proto)
		if ok != c.ok || got != c.port {
			t.Errorf("ServicePort(%q, %q) = %d, %v; want %d, %v", c.name, c.proto, got, ok, c.port, c.ok)
		}
	}
	names := []struct {
		port        uint16
		proto, name string
		ok          bool
	}{
		{80, "tcp", "http", true},
		{443, "tcp", "https", true},
		{53, "udp", "domain", true},
		{5353, "udp", "mdns", true},
		{8080, "tcp", "http-alt", true},
		{8080, "udp", "", false},
		{5060, "udp", "sip", true},
		{5061, "tcp", "sip-tls", true},
		{5060, "sctp", "", false},
		{0, "tcp", "", false},
		{22, "tcp", "ssh", true},
	}
	for _, c := range names {
		got, ok := r.ServiceName(c.port, c.proto)
		if ok != c.ok || got != c.name {
			t.Errorf("ServiceName(%d, %q) = %q, %v; want %q, %v", c.port, c.proto, got, ok, c.name, c.ok)
		}
	}
}

func TestServicesFirstLineWins(t *testing.T) {
	dir := t.TempDir()
	services := filepath.Join(dir, "services")
	writeFile(t, services, "one 100/tcp uno\ntwo 100/tcp\nuno 200/tcp\nbad 70000/tcp\nnoproto 300\n")
	r := NewResolverFiles("", services, "")
	if n, _ := r.ServiceName(100, "tcp"); n != "one" {
		t.Errorf("ServiceName(100) = %q, want one", n)
	}
	if p, _ := r.ServicePort("uno", "tcp"); p != 100 {
		t.Errorf("ServicePort(uno) = %d, want 100 (the alias on the earlier line)", p)
	}
	if _, ok := r.ServicePort("bad", "tcp"); ok {
		t.Error("a line with port 70000 was accepted")
	}
	if _, ok := r.ServicePort("noproto", "tcp"); ok {
		t.Error("a line without protocol was accepted")
	}
}

func TestHostSources(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "nsswitch.conf")
	writeFile(t, conf, "passwd: files\nhosts:  files mdns4_minimal [NOTFOUND=return] dns myhostname\n")
	got := hostSources(conf, false)
	if len(got) != 2 || got[0] != "files" || got[1] != "dns" {
		t.Errorf("hostSources = %v, want [files dns]", got)
	}
	writeFile(t, conf, "hosts: resolve [!UNAVAIL=return] files\n")
	if got := hostSources(conf, false); len(got) != 2 || got[0] != "dns" || got[1] != "files" {
		t.Errorf("hostSources = %v, want [dns files]", got)
	}
	writeFile(t, conf, "hosts: files\n")
	if got := hostSources(conf, false); len(got) != 1 || got[0] != "files" {
		t.Errorf("hostSources = %v, want [files]", got)
	}
	if got := hostSources(filepath.Join(dir, "missing"), false); len(got) != 2 || got[0] != "dns" {
		t.Errorf("hostSources(missing) = %v, want glibc default [dns files]", got)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
