package lvsprep

import (
	"io"
	"net/netip"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// commandNodes are lvsprep's commands, branches included, by their words
// ("" for lvsprep itself).
func commandNodes(t *testing.T) map[string]*kong.Node {
	t.Helper()
	var c cli
	parser, err := newParser(&c, io.Discard, io.Discard, defaultStateDir)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*kong.Node{}
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		nodes[commandPath(n)] = n
		for _, child := range n.Children {
			walk(child)
		}
	}
	walk(parser.Model.Node)
	if len(nodes) != 26 {
		t.Fatalf("%d commands, this test knows 26 (lvsprep, director, realserver, check and its two branches, status, 8 profiles, 8 checks, bird and its two)", len(nodes))
	}
	return nodes
}

// parses reports why lvsprep would not accept an example's command line
// ("" if it would): its words must parse, and a profile or check must
// build its profile.
func parses(line string) string {
	line = strings.TrimPrefix(line, "ip netns exec blue ")
	line, _, _ = strings.Cut(line, " > ")
	args, ok := strings.CutPrefix(line, "lvsprep ")
	if !ok {
		return "does not run lvsprep"
	}
	var c cli
	parser, err := newParser(&c, io.Discard, io.Discard, defaultStateDir)
	if err != nil {
		return err.Error()
	}
	code := -1
	defer recoverExit(&code)
	kctx, err := parser.Parse(strings.Fields(args))
	if err != nil {
		return err.Error()
	}
	if len(kctx.Selected().Children) > 0 {
		return "names no command"
	}
	if b, ok := kctx.Selected().Target.Addr().Interface().(birdConfig); ok {
		h := &Host{SourceAddr: func(netip.Addr) (netip.Addr, error) { return netip.MustParseAddr("10.2.0.99"), nil }}
		if _, err := b.config(h); err != nil {
			return err.Error()
		}
		return ""
	}
	if cmd := kctx.Command(); cmd != "status" {
		if _, err := selectedProfile(kctx, c.Undo); err != nil {
			return err.Error()
		}
	}
	return ""
}

// TestHelpOfEveryCommand: each command's --help ends with two or three
// examples that lvsprep accepts, lists only flags that mean something to
// it, names in its usage line every flag it needs, and shows each default
// once, as "(default: X)".
func TestHelpOfEveryCommand(t *testing.T) {
	th := newTestHost(t)
	for path := range commandNodes(t) {
		t.Run(strings.ReplaceAll(path, " ", "_"), func(t *testing.T) {
			out, errOut, code := th.run(append(strings.Fields(path), "--help")...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			_, ex, ok := strings.Cut(out, "\n\nExamples:\n")
			if !ok {
				t.Fatalf("no Examples section:\n%s", out)
			}
			n := 0
			for _, l := range strings.Split(strings.TrimSuffix(ex, "\n"), "\n") {
				switch {
				case l == "" || strings.HasPrefix(l, "  # "):
				case strings.HasPrefix(l, "  "):
					n++
					for _, part := range strings.Split(strings.TrimPrefix(l, "  "), " || ") {
						if why := parses(strings.TrimSuffix(part, " >/dev/null")); why != "" {
							t.Errorf("example %q: %s", part, why)
						}
					}
				default:
					t.Errorf("the help goes on after its examples: %q", l)
				}
			}
			if n < 2 || n > 3 {
				t.Errorf("%d examples, want 2 or 3:\n%s", n, ex)
			}
			meaningless := []string{}
			if path != "" {
				meaningless = append(meaningless, "--version")
			}
			if !changesHost(path) {
				meaningless = append(meaningless, "--dry-run", "--undo", "-n,")
			}
			if isBird(path) {
				meaningless = append(meaningless, "--state-dir")
			}
			for _, f := range meaningless {
				if strings.Contains(out, f) {
					t.Errorf("the help of %q names %s, which means nothing to it:\n%s", path, f, out)
				}
			}
			flat := strings.Join(strings.Fields(out), " ") // as if not wrapped
			stateDirs := 1
			if isBird(path) {
				stateDirs = 0
			}
			if strings.Count(flat, "(default: /run/lvsprep;") != stateDirs || strings.Contains(out, `="`) {
				t.Errorf("defaults not shown once each as (default: X):\n%s", out)
			}
		})
	}
}

func TestHelpUsageLinesNameTheNeededFlags(t *testing.T) {
	th := newTestHost(t)
	for args, want := range map[string]string{
		"director nat":      "Usage: lvsprep director nat --vip=ADDR[/LEN] --dev=IFACE --rs-net=PREFIX [flags]\n       lvsprep director nat --vip=ADDR[/LEN] --undo [flags]\n",
		"director fullnat":  "Usage: lvsprep director fullnat --vip=ADDR[/LEN] --dev=IFACE --snat=ADDR [flags]\n       lvsprep director fullnat --vip=ADDR[/LEN] --undo [flags]\n",
		"director ecmp":     "Usage: lvsprep director ecmp --vip=ADDR [flags]\n       lvsprep director ecmp --vip=ADDR --undo [flags]\n",
		"rs dr":             "Usage: lvsprep realserver dr --vip=ADDR --dev=IFACE [flags]\n       lvsprep realserver dr --vip=ADDR --undo [flags]\n",
		"realserver nat":    "Usage: lvsprep realserver nat --gateway=ADDR [flags]\n       lvsprep realserver nat --gateway=ADDR --undo [flags]\n",
		"check director dr": "Usage: lvsprep check director dr --vip=ADDR[/LEN] --dev=IFACE [flags]\n\n",
		"status":            "Usage: lvsprep status [flags]\n\n",
		"check realserver":  "Usage: lvsprep check realserver <command> [flags]\n\n",
	} {
		out, _, code := th.run(append(strings.Fields(args), "--help")...)
		if code != 0 || !strings.HasPrefix(out, want) {
			t.Errorf("lvsprep %s --help begins\n%s\nwant\n%s", args, out[:min(len(out), 200)], want)
		}
	}
	for flag, want := range map[string]string{"fullnat": "(default: tcp)", "ecmp": "(default: lo)"} {
		if out, _, _ := th.run("director", flag, "--help"); strings.Count(out, want) != 1 {
			t.Errorf("director %s --help lacks %q once:\n%s", flag, want, out)
		}
	}
}

// TestUsageErrorsPointAtTheCommandsHelp: a usage error names the help of
// the command given so far.
func TestUsageErrorsPointAtTheCommandsHelp(t *testing.T) {
	th := newTestHost(t)
	for _, tc := range []struct{ args, want string }{
		{"director nat --vip 10.0.0.1", "lvsprep: --dev is required (see lvsprep director nat --help)\n"},
		{"director nat --vip nonsense --dev eth0", `lvsprep: --vip "nonsense": not an IP address (see lvsprep director nat --help)` + "\n"},
		{"rs dr --vip 10.0.0.1 --dev eth0 --frobnicate", "lvsprep: unknown flag --frobnicate (see lvsprep realserver dr --help)\n"},
		{"rs tun", "lvsprep: missing flags: --vip=ADDR (see lvsprep realserver tun --help)\n"},
		{"check director", `lvsprep: expected one of "nat", "fullnat", "dr", "tun", "ecmp" (see lvsprep check director --help)` + "\n"},
		{"check rs dr --vip 10.0.0.1 --dev eth0 --undo", "lvsprep: check takes neither --undo nor --dry-run (see lvsprep check realserver dr --help)\n"},
		{"status -n", "lvsprep: status takes neither --undo nor --dry-run (see lvsprep status --help)\n"},
		{"frobnicate", "lvsprep: unexpected argument frobnicate (see lvsprep --help)\n"},
		{"director fullnat --vip 10.0.0.1 --dev eth0 --snat 10.0.0.2 --port 70000",
			"lvsprep: --port 70000: out of range 0-65535 (0: every port) (see lvsprep director fullnat --help)\n"},
		// A flag without its value, at the end or before another flag.
		{"director nat --vip", "lvsprep: --vip needs a value (an address, or an address/length) (see lvsprep director nat --help)\n"},
		{"director fullnat --vip 10.0.0.1 --proto", "lvsprep: --proto needs a value (one of tcp, udp, sctp) (see lvsprep director fullnat --help)\n"},
		{"director fullnat --vip 10.0.0.1 --port", "lvsprep: --port needs a value (a port number) (see lvsprep director fullnat --help)\n"},
		{"rs nat --gateway", "lvsprep: --gateway needs a value (an address) (see lvsprep realserver nat --help)\n"},
		{"--state-dir", "lvsprep: --state-dir needs a value (a directory) (see lvsprep --help)\n"},
		{"director nat --vip --dev eth0", "lvsprep: --vip needs a value (an address, or an address/length), not --dev; " +
			"write --vip=--dev if --dev is its value (see lvsprep director nat --help)\n"},
	} {
		_, errOut, code := th.run(strings.Fields(tc.args)...)
		if code != 2 || errOut != tc.want {
			t.Errorf("lvsprep %s: exit %d, stderr %q; want 2, %q", tc.args, code, errOut, tc.want)
		}
	}
}
