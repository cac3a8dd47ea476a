package birdconf

import (
	"flag"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/packaging/hosttool"
)

var update = flag.Bool("update", false, "rewrite testdata/*.conf from the generator")

var a = netip.MustParseAddr

// variants are every shape of configuration, by golden file name.
func variants() map[string]interface{ Config() (string, error) } {
	dir := Director{RouterID: a("10.2.0.11"), AS: 65001, Router: a("10.2.0.1"), RouterAS: 65000, Hold: 3}
	dirFull := dir
	dirFull.IPv6, dirFull.BFD, dirFull.Device, dirFull.Hold = true, true, "vips0", 9
	dirStatic := dir
	dirStatic.Static = []netip.Addr{a("10.3.0.1"), a("10.3.0.2"), a("2001:db8::1")}
	dirLab := dir
	dirLab.Log = "stderr"
	rtr := Router{RouterID: a("10.2.0.1"), AS: 65000, DirectorAS: 65001, Directors: []netip.Addr{a("10.2.0.11"), a("10.2.0.12")}, Hold: 3}
	rtrFull := rtr
	rtrFull.IPv6, rtrFull.BFD, rtrFull.AS = true, true, 4200000000
	rtrPrefixes := rtr
	rtrPrefixes.Prefixes = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/28"), netip.MustParsePrefix("203.0.113.64/26"), netip.MustParsePrefix("2001:db8:1::/64")}
	return map[string]interface{ Config() (string, error) }{
		"director.conf":          dir,
		"director-ipv6-bfd.conf": dirFull,
		"director-static.conf":   dirStatic,
		"director-stderr.conf":   dirLab,
		"router.conf":            rtr,
		"router-ipv6-bfd.conf":   rtrFull,
		"router-prefixes.conf":   rtrPrefixes,
	}
}

// TestGolden compares each variant with its file in testdata; -update
// rewrites them.
func TestGolden(t *testing.T) {
	for name, v := range variants() {
		got, err := v.Config()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("%s differs from the generator's output (go test -update rewrites it):\n%s", path, got)
		}
	}
}

// TestBirdParses has BIRD itself parse every variant (bird -p: parse
// only, nothing started).
func TestBirdParses(t *testing.T) {
	bird := hosttool.RequireFile(t, "/usr/sbin/bird", "bird2")
	for name, v := range variants() {
		conf, err := v.Config()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bird, "-p", "-c", path).CombinedOutput(); err != nil {
			t.Errorf("bird -p -c %s: %v\n%s\n%s", name, err, out, conf)
		}
	}
}

// TestDirectorExportsOnlyTheAnnouncingProtocol: every export filter of a
// director names the protocol that holds its VIPs, and nothing is
// imported.
func TestDirectorExportsOnlyTheAnnouncingProtocol(t *testing.T) {
	for name, v := range variants() {
		if !strings.HasPrefix(name, "director") {
			continue
		}
		conf, _ := v.Config()
		for _, l := range strings.Split(conf, "\n") {
			if strings.Contains(l, "export") && !strings.Contains(l, `import none; export where proto = "announced`) {
				t.Errorf("%s: %q", name, l)
			}
		}
	}
}

func TestInvalid(t *testing.T) {
	dir := Director{RouterID: a("10.2.0.11"), AS: 65001, Router: a("10.2.0.1"), RouterAS: 65000, Hold: 3}
	rtr := Router{RouterID: a("10.2.0.1"), AS: 65000, DirectorAS: 65001, Directors: []netip.Addr{a("10.2.0.11")}, Hold: 3}
	for _, tc := range []struct {
		name string
		v    interface{ Config() (string, error) }
		want string
	}{
		{"hold 2", func() Director { d := dir; d.Hold = 2; return d }(), "hold time 2: out of range 3-65535 seconds"},
		{"AS 0", func() Director { d := dir; d.AS = 0; return d }(), "AS numbers are 1-4294967295"},
		{"IPv6 router", func() Director { d := dir; d.Router = a("2001:db8::1"); return d }(), "router 2001:db8::1: not an IPv4 address"},
		{"quote in device", func() Director { d := dir; d.Device = `a"b`; return d }(), "not an interface name"},
		{"no director", func() Router { r := rtr; r.Directors = nil; return r }(), "no director"},
		{"director twice", func() Router { r := rtr; r.Directors = append(r.Directors, a("10.2.0.11")); return r }(), "given twice"},
		{"prefix with host bits", func() Router {
			r := rtr
			r.Prefixes = []netip.Prefix{netip.MustParsePrefix("203.0.113.1/28")}
			return r
		}(), "prefix 203.0.113.1/28: not a prefix with its host bits 0"},
		{"no router id", func() Router { r := rtr; r.RouterID = netip.Addr{}; return r }(), "router id invalid IP: not an IPv4 address"},
	} {
		if _, err := tc.v.Config(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
