package cmdline

import (
	"strconv"
	"strings"
	"testing"
)

// poptTrace runs the popt parser over argv and describes what it returned:
// "name" or "name=arg" per option ("name=<nil>" for an optional argument
// not given), then "leftover:word" per positional word, or "error:<msg>".
func poptTrace(argv []string, posix bool) []string {
	p := newPoptParser(append([]string{"ipvsadm"}, argv...), posix)
	var out []string
	for {
		opt, arg, done, err := p.nextOption()
		if err != nil {
			return append(out, "error:"+err.message())
		}
		if done {
			break
		}
		s := opt.Long
		switch {
		case opt.Arg == ArgNone:
		case arg == nil:
			s += "=<nil>"
		default:
			s += "=" + *arg
		}
		out = append(out, s)
	}
	for _, w := range p.leftovers {
		out = append(out, "leftover:"+w)
	}
	return out
}

func TestPoptSyntax(t *testing.T) {
	for _, tc := range []struct {
		argv  string // words separated by single spaces; "''" is the empty word
		posix bool
		want  string // poptTrace joined by spaces
	}{
		{argv: "-Ln", want: "list numeric"},
		{argv: "-Lnc", want: "list numeric connection"},
		{argv: "-Lnt 10.0.0.1:80", want: "list numeric tcp-service=10.0.0.1:80"},
		{argv: "-A -t10.0.0.1:80 -srr -p600", want: "add-service tcp-service=10.0.0.1:80 scheduler=rr persistent=600"},
		{argv: "-At 10.0.0.1:82 -p 700", want: "add-service tcp-service=10.0.0.1:82 persistent=700"},
		{argv: "-A -t=10.0.0.2:80 -p=5", want: "add-service tcp-service=10.0.0.2:80 persistent=5"},
		{argv: "-A -t= -p=", want: "add-service tcp-service= persistent="},
		{argv: "-A --tcp-service=10.0.0.1:80 --scheduler=rr --persistent=600", want: "add-service tcp-service=10.0.0.1:80 scheduler=rr persistent=600"},
		{argv: "-A --tcp-service 10.0.0.1:80 --persistent 42", want: "add-service tcp-service=10.0.0.1:80 persistent=42"},
		{argv: "-A --tcp-service=", want: "add-service tcp-service="},
		// A required argument is the next word whatever it looks like.
		{argv: "-A -t 1.2.3.4:80 -s -p", want: "add-service tcp-service=1.2.3.4:80 scheduler=-p"},
		{argv: "-a -w -1", want: "add-server weight=-1"},
		// An optional one only if the word does not start with '-'.
		{argv: "-A -p -s rr", want: "add-service persistent=<nil> scheduler=rr"},
		{argv: "-A -p", want: "add-service persistent=<nil>"},
		{argv: "-A -p -1", want: "add-service persistent=<nil> error:-1: unknown option"},
		{argv: "-A -p ''", want: "add-service persistent="},
		{argv: "-A -p -", want: "add-service persistent=<nil> leftover:-"},
		// No abbreviations; single-dash long names are clusters.
		{argv: "--lis", want: "error:--lis: unknown option"},
		{argv: "-list", want: "list ipip scheduler=t"},
		{argv: "-list=x", want: "list ipip scheduler=t=x"},
		{argv: "--list", want: "list"},
		{argv: "-l", want: "list"},
		// "--" and "-".
		{argv: "-L --", want: "list"},
		{argv: "-L -- -n --bogus", want: "list leftover:-n leftover:--bogus"},
		{argv: "-- -L", want: "leftover:-L"},
		{argv: "-L -", want: "list leftover:-"},
		{argv: "-L ''", want: "list leftover:"},
		// Positional words anywhere, unless POSIXLY_CORRECT.
		{argv: "-L foo -n", want: "list numeric leftover:foo"},
		{argv: "foo -L", want: "list leftover:foo"},
		{argv: "-L foo -n", posix: true, want: "list leftover:foo leftover:-n"},
		{argv: "--set 10 20 30 --sort", want: "set sort leftover:10 leftover:20 leftover:30"},
		// Errors name the whole word last consumed.
		{argv: "-L --bogus", want: "list error:--bogus: unknown option"},
		{argv: "-L --bogus=1", want: "list error:--bogus=1: unknown option"},
		{argv: "-LQ", want: "list error:-LQ: unknown option"},
		{argv: "-L -Q", want: "list error:-Q: unknown option"},
		{argv: "-L -x", want: "list error:-x: missing argument"},
		{argv: "-A -t", want: "add-service error:-t: missing argument"},
		{argv: "-A --tcp-service", want: "add-service error:--tcp-service: missing argument"},
		{argv: "-L --start-daemon", want: "list error:--start-daemon: missing argument"},
		{argv: "-L --numeric=5", want: "list error:--numeric=5: option does not take an argument"},
		{argv: "-L --numeric=", want: "list error:--numeric=: option does not take an argument"},
		{argv: "-Ln=5", want: "list error:-Ln=5: option does not take an argument"},
		{argv: "--start-daemon master -I 5", want: "start-daemon=master error:-I: unknown option"},
		{argv: "-V", want: "error:-V: unknown option"},
		{argv: "-=x", want: "error:-=x: unknown option"},
		{argv: "--=x", want: "error:--=x: unknown option"},
		// popt replaces "!#:+" in an argument with the next positional
		// word, which is then no longer positional.
		{argv: "-A -s rr!#:+ foo bar", want: "add-service scheduler=rrfoo leftover:bar"},
		{argv: "-A -s !#:+!#:+ -n foo", want: "add-service scheduler=foofoo numeric"},
		{argv: "-A -s x!#:+", want: "add-service scheduler=x!#:+"},
	} {
		var argv []string
		for _, w := range strings.Split(tc.argv, " ") {
			if w == "''" {
				w = ""
			}
			argv = append(argv, w)
		}
		got := strings.Join(poptTrace(argv, tc.posix), " ")
		if got != tc.want {
			t.Errorf("%q (posix %v):\n got  %s\n want %s", tc.argv, tc.posix, got, tc.want)
		}
	}
}

// TestParseOrder checks that popt errors and value errors are reported in
// command-line order, and the first-option rules.
func TestParseOrder(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		kind Kind
		want string
	}{
		{[]string{"-A", "-t", "bad:80", "--bogus"}, Invalid, "illegal virtual server address[:port] specified\n"},
		{[]string{"-A", "--bogus", "-t", "bad:80"}, PoptError, "--bogus: unknown option\n"},
		{[]string{"-a", "-r", "bad2", "-t", "bad:80"}, Invalid, "illegal real server address[:port] specified\n"},
		{[]string{"-a", "-t", "10.0.0.1:80", "-r", "1.1.1.1", "-w", "1", "-w", "x"}, Invalid, "multiple 'weight' options specified\n"},
		{[]string{"-n", "-L"}, TryHelp, "Try `ipvsadm -h' or 'ipvsadm --help' for more information.\n"},
		{[]string{"-L", "--start-daemon", "master"}, Invalid, "invalid option `master'\n"},
		{[]string{"-A", "-t", "10.0.0.1:80", "-p", "10", "--set"}, Invalid, "invalid option `--set'\n"},
		{[]string{"-Lh"}, Invalid, "invalid option `-Lh'\n"},
		{[]string{"-L", "-L"}, Invalid, "invalid option `-L'\n"},
		{[]string{"--start-daemon=foo"}, Invalid, "illegal start-daemon parameter specified\n"},
		{[]string{"--stop-daemon", "foo"}, Invalid, "illegal start_daemon specified\n"},
		{[]string{"--set", "a", "b", "-w", "x"}, Invalid, "illegal weight specified\n"},
		{[]string{"--set", "1", "b", "c"}, Invalid, "invalid timeout value `b' specified\n"},
		{[]string{"--set", "1", "2"}, Invalid, "--set option requires 3 timeout values\n"},
		{[]string{"-A", "-t", "1.2.3.4:80", "-6"}, Invalid, "-6 used before -f\n\n"},
		{[]string{"-A", "-t", "1.2.3.4:80", "-b", "flag-1", "x"}, Invalid, "unexpected argument x\n"},
		{[]string{"-A", "-t", "1.2.3.4:80", "-b", ",,"}, Crash, ""},
		{[]string{"-A", "-t", "1.2.3.4:80", "-b", ""}, Success, ""},
		// The flag list is checked against the final scheduler, then the
		// matrix.
		{[]string{"-A", "-b", "sh-port", "-s", "sh", "-t", "1.2.3.4:80"}, Success, ""},
		{[]string{"-D", "-b", "sh-port", "-t", "1.2.3.4:80"}, Invalid, "incompatible scheduler flag `sh-port'\n"},
	} {
		p := &Parser{Resolver: testResolver(t)}
		inv, o := p.Parse(append([]string{"ipvsadm"}, tc.argv...))
		got := Outcome{Kind: Success}
		if o != nil {
			got = *o
		} else if inv == nil {
			t.Fatalf("%v: no invocation and no outcome", tc.argv)
		}
		if got.Kind != tc.kind || got.Stderr != tc.want {
			t.Errorf("%v: got %v %q, want %v %q", tc.argv, got.Kind, got.Stderr, tc.kind, tc.want)
		}
	}
}

// TestParseValues checks what a valid command line records.
func TestParseValues(t *testing.T) {
	p := &Parser{Resolver: testResolver(t)}
	parse := func(argv ...string) *Invocation {
		t.Helper()
		inv, o := p.Parse(append([]string{"ipvsadm"}, argv...))
		if o != nil {
			t.Fatalf("%v: %+v", argv, *o)
		}
		return inv
	}
	inv := parse("-A", "-t", "[2001:db8::9]:80", "-p", "-M", "64x", "-s", "abcdefghijklmnopqrstuvwxyz", "--pe", "sipsipsipsipsipsip")
	want := "2001:db8::9 80 64 persistent 360 abcdefghijklmno sipsipsipsipsips"
	got := strings.Join([]string{inv.Service.Addr.String(), itoa(inv.Service.Port), itoa(inv.Service.Netmask), "persistent", itoa(inv.Service.Timeout), inv.Service.Scheduler, inv.Service.PEName}, " ")
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// An IPv6 mask given before the address is lost.
	if inv := parse("-A", "-M", "64", "-t", "[2001:db8::9]:82", "-p", "10"); inv.Service.Netmask != 128 {
		t.Errorf("mask %d, want 128", inv.Service.Netmask)
	}
	if inv := parse("-A", "-f", "3", "-M", "64", "-6", "-p", "5"); inv.Service.Netmask != 128 || inv.Service.Family != 10 {
		t.Errorf("fwmark -6: %+v", inv.Service)
	}
	// -r before -t gets the port known then (0); -m keeps it.
	if inv := parse("-a", "-r", "192.168.10.2", "-t", "10.0.0.1:22", "-m"); inv.Dest.Port != 0 {
		t.Errorf("dest port %d, want 0", inv.Dest.Port)
	}
	// -g replaces a given port with the service's.
	if inv := parse("-a", "-t", "10.0.0.1:80", "-r", "192.168.10.4:9999", "-g"); inv.Dest.Port != 80 {
		t.Errorf("dest port %d, want 80", inv.Dest.Port)
	}
	// -d never does.
	if inv := parse("-d", "-t", "10.0.0.1:80", "-r", "192.168.10.4:9999"); inv.Dest.Port != 9999 {
		t.Errorf("dest port %d, want 9999", inv.Dest.Port)
	}
	// Defaults.
	inv = parse("-a", "-t", "10.0.0.1:80", "-r", "rs1")
	if inv.Dest.Weight != 1 || inv.Dest.FwdMethod != 3 || inv.Dest.Addr.String() != "192.168.10.1" {
		t.Errorf("defaults: %+v", inv.Dest)
	}
	inv = parse("--start-daemon", "backup", "--mcast-interface", "abcdefghijklmnopqrstuvwxyz", "--mcast-group", "ff02::1234", "--syncid", "7")
	if inv.Daemon.Interface != "abcdefghijklmno" || inv.Daemon.Group.String() != "ff02::1234" || inv.Daemon.SyncID != 7 || inv.Daemon.State != 2 {
		t.Errorf("daemon: %+v", inv.Daemon)
	}
	if inv := parse("--start-daemon", "master"); inv.Daemon.Interface != "eth0" {
		t.Errorf("default interface %q", inv.Daemon.Interface)
	}
	inv = parse("-a", "-t", "10.0.0.1:80", "-r", "1.1.1.1", "-i", "--tun-type", "gue", "--tun-port", "6080", "--tun-remcsum")
	if inv.Dest.TunType != 1 || inv.Dest.TunPort != 6080 || inv.Dest.TunFlags != 2 {
		t.Errorf("tunnel: %+v", inv.Dest)
	}
	inv = parse("-E", "-t", "10.0.0.9:80", "-s", "sh", "-b", "sh-fallback,flag-3")
	if inv.Service.Flags != 0x08|0x20 {
		t.Errorf("flags %#x", inv.Service.Flags)
	}
}

func itoa[T ~uint16 | ~uint32](v T) string { return strconv.FormatUint(uint64(v), 10) }
