package names

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// FuzzNameFiles: the hosts and services file parsers on any contents,
// asked the questions ipvsadm asks. They must end without a panic, and
// every answer must be consistent: no empty names, no IPv6 answer to an
// IPv4 question, and a service name found by port names a port.
func FuzzNameFiles(f *testing.F) {
	hosts, _ := os.ReadFile(goldenHosts)
	services, _ := os.ReadFile("testdata/services")
	f.Add(hosts, services, "vip1.example.com", "http", uint16(80))
	f.Add([]byte("127.0.0.1 localhost\n::1 localhost ip6-localhost\n10.0.0.1\tA b  # c\n#x\n"), []byte("http 80/tcp www\nhttp 80/udp\nbad 99999/tcp\nx 1/sctp y z\n"), "a", "www", uint16(1))
	f.Add([]byte("10.0.0.1"), []byte("http"), "", "", uint16(0))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, hostsData, servicesData []byte, name, service string, port uint16) {
		hp, sp := filepath.Join(dir, "hosts"), filepath.Join(dir, "services")
		if err := os.WriteFile(hp, hostsData, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(sp, servicesData, 0o600); err != nil {
			t.Fatal(err)
		}
		r := NewResolverFiles(hp, sp, "")
		if a, ok := r.LookupHost4(name); ok && !a.Is4() {
			t.Fatalf("LookupHost4(%q) = %v, not IPv4", name, a)
		}
		for _, a := range []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, 1}), netip.MustParseAddr("::1"), netip.AddrFrom4([4]byte{127, 0, 0, 1})} {
			if n, ok := r.LookupAddr(a); ok && n == "" {
				t.Fatalf("LookupAddr(%v): an empty name", a)
			}
		}
		for _, proto := range []string{"tcp", "udp", "sctp"} {
			if p, ok := r.ServicePort(service, proto); ok {
				if n, ok := r.ServiceName(p, proto); !ok || n == "" {
					t.Fatalf("ServicePort(%q, %s) = %d, but port %d has no name", service, proto, p, p)
				}
			}
			if n, ok := r.ServiceName(port, proto); ok {
				if _, ok := r.ServicePort(n, proto); !ok {
					t.Fatalf("ServiceName(%d, %s) = %q, which names no port", port, proto, n)
				}
			}
		}
	})
}
