package wrappers

import (
	"io"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"github.com/lvskit/lvskit/ipvsadm"
	"github.com/lvskit/lvskit/names"
	"golang.org/x/sys/unix"
)

func TestUTF8Locale(t *testing.T) {
	for env, want := range map[[3]string]bool{
		{"", "", ""}:                       false,
		{"C", "", ""}:                      false,
		{"", "", "en_US.UTF-8"}:            true,
		{"", "C.utf8", ""}:                 true,
		{"C", "C.UTF-8", "en_US.UTF-8"}:    false,
		{"de_DE.UTF-8@euro", "", ""}:       true,
		{"", "", "de_DE.ISO-8859-1"}:       false,
		{"", "POSIX", "en_US.UTF-8"}:       false,
		{"", "", "en_US"}:                  false,
		{"en_US.Utf-8", "C.ISO8859-1", ""}: true,
	} {
		got := utf8Locale(func(k string) string {
			switch k {
			case "LC_ALL":
				return env[0]
			case "LC_CTYPE":
				return env[1]
			}
			return env[2]
		})
		if got != want {
			t.Errorf("LC_ALL=%q LC_CTYPE=%q LANG=%q: UTF-8 %v, want %v", env[0], env[1], env[2], got, want)
		}
	}
}

func TestScriptName(t *testing.T) {
	for arg0, want := range map[string]string{
		"ipvsadm-save":              "ipvsadm-save",
		"/usr/sbin/ipvsadm-save":    "ipvsadm-save",
		"./save/":                   "save",
		"/":                         "/",
		"//":                        "/",
		"/opt/lvskit/bin/my-save//": "my-save",
	} {
		if got := scriptName(arg0); got != want {
			t.Errorf("scriptName(%q) = %q, want %q", arg0, got, want)
		}
	}
}

// scriptRun is one wrapper run on a fake kernel.
type scriptRun struct {
	stdout, stderr string
	status         int
}

// fakeEnv is the environment of an ipvsadm process on the fake kernel f.
// (ipvsadm's own tests run the restore engine on a connection that answers
// late.)
func fakeEnv(t testing.TB, f *ipvstest.Fake) ipvsadm.Env {
	return ipvsadm.Env{
		Open:          func() (ipvs.Client, error) { return &fakeKernel{f}, nil },
		Resolver:      testResolver(t),
		RestoreEngine: ipvsadm.Pipelined(ipvsadm.DefaultWindow),
	}
}

// scratch is a fresh fake kernel: the empty table a restore is tried in.
func scratch() (ipvs.Client, error) { return ipvstest.New(), nil }

// restoreScript runs ipvsadm-restore on the fake kernel of env, trying the
// input in a scratch fake first.
func restoreScript(args []string, stdin io.Reader, stdout, stderr io.Writer, env ipvsadm.Env, getenv func(string) string) int {
	return RestoreMain(args, stdin, stdout, stderr, RestoreEnv{Env: env, Scratch: scratch, Getenv: getenv})
}

// fakeKernel keeps the fake usable after a process closes its client, as
// the kernel's tables outlive one ipvsadm process.
type fakeKernel struct{ *ipvstest.Fake }

func (*fakeKernel) Close() error { return nil }

// testResolver answers names from the golden transcripts' hosts file and
// ipvsadm's services file, never from the host or DNS.
func testResolver(t testing.TB) *names.Resolver {
	t.Helper()
	return names.NewResolverFiles(filepath.Join("..", "..", "testscripts", "golden", "hosts"),
		filepath.Join("..", "testdata", "services"), "")
}

func TestSaveMain(t *testing.T) {
	f := ipvstest.New()
	for _, line := range []string{"-A -t 10.0.0.1:80 -s rr", "-a -t 10.0.0.1:80 -r 192.168.10.1:80 -m -w 2"} {
		var errb strings.Builder
		if st := ipvsadm.Main(append([]string{"ipvsadm"}, strings.Fields(line)...), nil, io.Discard, &errb, fakeEnv(t, f)); st != 0 {
			t.Fatalf("%s: status %d %s", line, st, errb.String())
		}
	}
	numeric := "-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 192.168.10.1:80 -m -w 2\n"
	names := "-A -t vip1.example.com:http -s rr\n-a -t vip1.example.com:http -r rs1.example.com:http -m -w 2\n"
	usage := ": Script to save the IPVS table to stdout.\n   With the -n option, prints out the table in numeric format.\n"
	tests := []struct {
		args []string
		want scriptRun
	}{
		{[]string{"ipvsadm-save"}, scriptRun{names, "", 0}},
		{[]string{"ipvsadm-save", "-n"}, scriptRun{numeric, "", 0}},
		{[]string{"ipvsadm-save", "foo", "-n", "bar"}, scriptRun{numeric, "", 0}},
		{[]string{"ipvsadm-save", "-n", "-n"}, scriptRun{numeric, "", 0}},
		{[]string{"/usr/sbin/ipvsadm-save", "-n", "-x"}, scriptRun{"", "ipvsadm-save" + usage, 1}},
		{[]string{"save", "--numeric"}, scriptRun{"", "save" + usage, 1}},
		{[]string{"ipvsadm-save", "-"}, scriptRun{"", "ipvsadm-save" + usage, 1}},
		{[]string{"ipvsadm-save", "-S"}, scriptRun{"", "ipvsadm-save" + usage, 1}},
	}
	for _, tc := range tests {
		var out, errb strings.Builder
		st := SaveMain(tc.args, nil, &out, &errb, fakeEnv(t, f))
		got := scriptRun{out.String(), errb.String(), st}
		if got != tc.want {
			t.Errorf("%q: got %+v, want %+v", tc.args, got, tc.want)
		}
	}
}

func TestSaveScriptInitError(t *testing.T) {
	env := ipvsadm.Env{Open: func() (ipvs.Client, error) {
		return nil, &ipvs.OpError{Op: ipvs.CmdGetInfo, Err: unix.EPERM}
	}}
	var out, errb strings.Builder
	st := SaveMain([]string{"ipvsadm-save", "-n"}, nil, &out, &errb, env)
	want := "Can't initialize ipvs: Permission denied (you must be root)\nAre you sure that IP Virtual Server is built in the kernel or as module?\n"
	if st != 2 || out.String() != "" || errb.String() != want {
		t.Errorf("status %d, stdout %q, stderr %q; want 2, \"\", %q", st, out.String(), errb.String(), want)
	}
}

// What a refused restore prints last, and the table it leaves.
const (
	refused   = "ipvsadm-restore: input refused; the IPVS table was not changed\n"
	untouched = "-A -t 10.9.9.9:1 -s wlc\n"
)

func TestRestoreScript(t *testing.T) {
	tests := []struct {
		name, input string
		want        scriptRun
		save        string
	}{
		{"empty input flushes", "", scriptRun{"", "", 0}, ""},
		{"comments dropped", "# ipvsadm.rules\n-A -t 10.0.0.2:80 -s rr\n#-a x\n-a -t 10.0.0.2:80 -r 192.168.0.1:80 -m\n",
			scriptRun{"", "", 0}, "-A -t 10.0.0.2:80 -s rr\n-a -t 10.0.0.2:80 -r 192.168.0.1:80 -m -w 1\n"},
		// Debian's script flushes, restores line 1 and stops at line 2.
		{"indented comment is refused", "-A -t 10.0.0.2:80\n  # x\n-A -t 10.0.0.3:80\n",
			scriptRun{"", "ipvsadm-restore: line 2: does not parse: it does not start with an ipvsadm command option\n" + refused, 1}, untouched},
		{"trailing white space is kept by the final newline", "-A -t 10.0.0.2:80  ",
			scriptRun{"", "", 0}, "-A -t 10.0.0.2:80 -s wlc\n"},
		// Debian's script flushes, restores line 1 and exits 255.
		{"kernel error is refused", "-A -t 10.0.0.2:80\n-A -t 10.0.0.2:80\n\n\n",
			scriptRun{"", "Service already exists\nipvsadm-restore: 1 line failed (input line 2)" + trial, 1}, untouched},
		// Debian's script flushes and restores nothing (echo takes -n).
		{"echo option is refused", "-n\n", scriptRun{"", "ipvsadm-restore: line 1: does not parse: it does not start with an ipvsadm command option\n" + refused, 1}, untouched},
		{"NUL", "-A -t 10.0.0.2:80\n-A -t 10.0.0.3:80\x00\n", scriptRun{"", "ipvsadm-restore: line 2: holds a NUL byte (column 18): this is not a rules file\n" + refused, 1}, untouched},
		{"bad option", "-A -t 10.0.0.2:80\n-A -t 10.0.0.3:80 --bogus\n-A -t 10.0.0.4:80 -s\n", scriptRun{"",
			"ipvsadm-restore: line 2: does not parse: --bogus: unknown option\n" +
				"ipvsadm-restore: line 3: does not parse: -s: missing argument\n" + refused, 1}, untouched},
		{"bad address", "# c\n-A -t 10.0.0.2:80\n-a -t 10.0.0.2:80 -r nosuch.invalid\n", scriptRun{"",
			"ipvsadm-restore: line 3: does not parse: illegal real server address[:port] specified\n" + refused, 1}, untouched},
		{"nested restore", "-R\n", scriptRun{"", "ipvsadm-restore: line 1: is a nested restore (-R), which ipvsadm refuses\n" + refused, 1}, untouched},
		{"listing", "-A -t 10.0.0.2:80\n-S -n\n", scriptRun{"-A -t 10.0.0.2:80 -s wlc\n", "", 0}, "-A -t 10.0.0.2:80 -s wlc\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := ipvstest.New()
			// A table to be flushed first.
			if err := f.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &ipvs.Service{
				Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: mustAddr("10.9.9.9"), Port: 1,
				Scheduler: "wlc", Netmask: 0xffffffff}}); err != nil {
				t.Fatal(err)
			}
			var out, errb strings.Builder
			st := restoreScript([]string{"ipvsadm-restore", "-x"}, strings.NewReader(tc.input), &out, &errb, fakeEnv(t, f), func(string) string { return "" })
			got := scriptRun{out.String(), errb.String(), st}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			var save strings.Builder
			if st := SaveMain([]string{"ipvsadm-save", "-n"}, nil, &save, io.Discard, fakeEnv(t, f)); st != 0 || save.String() != tc.save {
				t.Errorf("table afterwards:\n%s(status %d), want\n%s", save.String(), st, tc.save)
			}
		})
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
