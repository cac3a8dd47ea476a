package lvsprep

import (
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/packaging/hosttool"
)

// The configurations' text is lvsprep/birdconf's, tested there; these
// tests are of the command line: flags to fields, the default router id,
// errors before any output, and a host left as it was.

func TestBirdDirector(t *testing.T) {
	th := newTestHost(t)
	// --ipv6 needs an IPv6 address that is not link-local on the link to
	// --router, or lvsprep warns (TestBirdDirectorIPv6NextHop).
	th.links.Links["eth1"].Addrs = append(th.links.Links["eth1"].Addrs, netip.MustParsePrefix("2001:db8::1/64"))
	out, errOut, code := th.run("bird", "director", "--router", "10.0.0.254", "--router-as", "65000", "--as", "4200000000",
		"--ipv6", "--bfd", "--hold", "6", "--device", "vips0")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"router id 10.0.0.1;\n", // the address that reaches --router
		"\tlocal 10.0.0.1 as 4200000000;\n", "\tneighbor 10.0.0.254 as 65000;\n",
		"protocol direct announced {\n\tipv4;\n\tipv6;\n\tinterface \"vips0\";\n}\n",
		"\thold time 6;\n\tkeepalive time 2;\n", "\tbfd on;\n", "protocol bfd {",
		"\tipv6 { import none; export where proto = \"announced\"; };\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(th.stateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the state directory was created: %v", err)
	}
	out = th.mustRun("bird", "director", "--router", "10.0.0.254", "--router-as", "65000", "--as", "65001",
		"--router-id", "10.0.0.7", "--static", "10.3.0.1", "--static", "2001:db8::1/128")
	for _, want := range []string{"router id 10.0.0.7;\n", "\troute 10.3.0.1/32 unreachable;\n", "\troute 2001:db8::1/128 unreachable;\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "protocol direct") {
		t.Errorf("--static and protocol direct:\n%s", out)
	}
}

func TestBirdRouter(t *testing.T) {
	th := newTestHost(t)
	out := th.mustRun("bird", "router", "--as", "65000", "--director-as", "65001", "--director", "10.0.0.11", "--director", "10.0.0.12",
		"--prefix", "203.0.113.0/28")
	for _, want := range []string{
		"router id 10.0.0.1;\n", "\tlocal 10.0.0.1 as 65000;\n", "\tmerge paths on;\n",
		"\tipv4 { import where net.len = 32 || net = 203.0.113.0/28; export none; };\n",
		"protocol bgp director_10_0_0_11 from director { neighbor 10.0.0.11 as 65001; }\n",
		"protocol bgp director_10_0_0_12 from director { neighbor 10.0.0.12 as 65001; }\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
}

// TestBirdOutputParses has BIRD parse what the commands print, with the
// examples of their help.
func TestBirdOutputParses(t *testing.T) {
	bird := hosttool.RequireFile(t, "/usr/sbin/bird", "bird2")
	th := newTestHost(t)
	for path, examples := range birdExamples {
		for i, e := range examples {
			line, _, _ := strings.Cut(e.cmd, " > ")
			out := th.mustRun(strings.Fields(strings.TrimPrefix(line, "lvsprep "))...)
			f := filepath.Join(t.TempDir(), "bird.conf")
			if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			if msg, err := exec.Command(bird, "-p", "-c", f).CombinedOutput(); err != nil {
				t.Errorf("%s example %d: bird -p: %v\n%s\n%s", path, i, err, msg, out)
			}
		}
	}
}

func TestBirdFlagErrors(t *testing.T) {
	th := newTestHost(t)
	dir := "bird director --router 10.0.0.254 --router-as 65000 --as 65001 "
	rtr := "bird router --as 65000 --director-as 65001 --director 10.0.0.11 "
	for _, tc := range []struct{ args, want string }{
		{dir + "--hold 2", "--hold 2: out of range 3-65535 seconds"},
		{dir + "--hold 65536", "--hold 65536: out of range 3-65535 seconds"},
		{"bird director --router 10.0.0.254 --router-as 0 --as 65001", `--router-as "0": not an AS number (1-4294967295)`},
		{"bird director --router 10.0.0.254 --router-as 65000 --as 4294967296", `--as "4294967296": not an AS number (1-4294967295)`},
		{"bird director --router 10.0.0.254 --router-as 65000 --as AS65001", `--as "AS65001": not an AS number (1-4294967295)`},
		{"bird director --router 2001:db8::1 --router-as 65000 --as 65001", "--router 2001:db8::1: not an IPv4 address (the BGP sessions run over IPv4)"},
		{"bird director --router nonsense --router-as 65000 --as 65001", `--router "nonsense": not an IP address`},
		{dir + "--router-id 10.0.0.254", "--router-id 10.0.0.254 is --router's address"},
		{dir + "--router-id 2001:db8::2", "--router-id 2001:db8::2: not an IPv4 address (the BGP sessions run over IPv4)"},
		{dir + "--static 10.3.0.0/24", "--static 10.3.0.0/24: this profile holds the VIP as a host address (/32), not a subnet"},
		{dir + "--device a/b", `--device "a/b": not a valid interface name`},
		{dir + "--dry-run", "bird takes neither --undo nor --dry-run: it changes nothing"},
		{"bird director --router 10.0.0.254 --as 65001", "missing flags: --router-as=ASN"},
		{"bird director --router 10.0.0.254 --router-as 65000 --as", "--as needs a value (an AS number)"},
		{rtr + "--director 10.0.0.11", "--director 10.0.0.11: given twice"},
		{rtr + "--router-id 10.0.0.11", "--router-id 10.0.0.11 is a --director's address"},
		{rtr + "--hold x", `--hold: expected a valid 64 bit int but got "x"`},
		{"bird router --as 65000 --director-as 65001", "missing flags: --director=ADDR,..."},
		{rtr + "--prefix 203.0.113.1/28", `--prefix "203.0.113.1/28": not a prefix with its host bits 0 (ADDR/LEN)`},
		{rtr + "--prefix 203.0.113.1", `--prefix "203.0.113.1": not a prefix with its host bits 0 (ADDR/LEN)`},
	} {
		t.Run(tc.args, func(t *testing.T) {
			out, errOut, code := th.run(strings.Fields(tc.args)...)
			cmd := strings.Join(strings.Fields(tc.args)[:2], " ")
			want := "lvsprep: " + tc.want + " (see lvsprep " + cmd + " --help)\n"
			if code != 2 || out != "" || errOut != want {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing, %q", code, out, errOut, want)
			}
		})
	}
}

// TestBirdRouterIDUnreachable: without --router-id and without a route to
// the peer, the error says to give one.
func TestBirdRouterIDUnreachable(t *testing.T) {
	th := newTestHost(t)
	th.SourceAddr = func(netip.Addr) (netip.Addr, error) { return netip.Addr{}, errors.New("network is unreachable") }
	out, errOut, code := th.run("bird", "director", "--router", "10.9.0.1", "--router-as", "65000", "--as", "65001")
	want := "lvsprep: no address of this host reaches --router 10.9.0.1 (network is unreachable): give --router-id (see lvsprep bird director --help)\n"
	if code != 2 || out != "" || errOut != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing, %q", code, out, errOut, want)
	}
}

// TestBirdDirectorIPv6NextHop: with --ipv6, a link to --router (eth1,
// which holds the source address 10.0.0.1) with only link-local IPv6
// addresses gets a warning naming it, and the configuration is printed
// all the same; a global address on it, or no --ipv6, gets none.
func TestBirdDirectorIPv6NextHop(t *testing.T) {
	for _, tc := range []struct {
		ipv6 bool
		eth1 string // an IPv6 address besides 10.0.0.1/24
		warn bool
	}{{true, "fe80::1/64", true}, {true, "2001:db8::1/64", false}, {false, "fe80::1/64", false}} {
		th := newTestHost(t)
		th.links.Links["eth1"].Addrs = append(th.links.Links["eth1"].Addrs, netip.MustParsePrefix(tc.eth1))
		// eth0 has a global IPv6 address, but it is not the link to --router.
		th.links.Links["eth0"].Addrs = append(th.links.Links["eth0"].Addrs, netip.MustParsePrefix("2001:db8:9::2/64"))
		args := []string{"bird", "director", "--router", "10.0.0.254", "--router-as", "65000", "--as", "65001"}
		if tc.ipv6 {
			args = append(args, "--ipv6")
		}
		out, errOut, code := th.run(args...)
		want := ""
		if tc.warn {
			want = "lvsprep: warning: eth1, this host's link to --router 10.0.0.254, has no IPv6 address but link-local ones: BIRD will refuse every IPv6 VIP (\"Missing next hop address\") until it has one in the router's IPv6 prefix\n"
		}
		if code != 0 || errOut != want || !strings.Contains(out, "router id 10.0.0.1;\n") {
			t.Errorf("--ipv6 %v, eth1 %s: exit %d, stderr %q, stdout %q; want 0, %q", tc.ipv6, tc.eth1, code, errOut, out, want)
		}
	}
}
