package lvsctl

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagsCheckedBeforeAnyChange: a bad flag value is exit 2 with a
// message naming the flag, and the kernel's table is left as it was.
func TestFlagsCheckedBeforeAnyChange(t *testing.T) {
	f, env, file := runFixture(t)
	dir := t.TempDir()
	notDir := filepath.Join(dir, "journal-file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	old := lookupHost
	lookupHost = func(_ context.Context, host string) ([]string, error) {
		if host == "localhost" {
			return []string{"127.0.0.1"}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	defer func() { lookupHost = old }()

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--metrics-listen", "notanaddr", file},
			`lvsctl: --metrics-listen: "notanaddr" is not HOST:PORT (e.g. 127.0.0.1:9117, [::1]:9117 or :9117) (see lvsctl run --help)`},
		{[]string{"run", "--metrics-listen", "127.0.0.1:70000", file},
			"lvsctl: --metrics-listen: port 70000 is out of range 0-65535 (see lvsctl run --help)"},
		{[]string{"run", "--metrics-listen", "127.0.0.1:", file},
			`lvsctl: --metrics-listen: "127.0.0.1:" has no port (see lvsctl run --help)`},
		{[]string{"run", "--metrics-listen", "127.0.0.1:nosuchservice", file},
			`lvsctl: --metrics-listen: "nosuchservice" is not a port number or a known service (see lvsctl run --help)`},
		{[]string{"run", "--metrics-listen", "metrics.invalid:9117", file},
			"lvsctl: --metrics-listen: metrics.invalid does not resolve: no such host (see lvsctl run --help)"},
		{[]string{"run", "--metrics-listen", busy.Addr().String(), file},
			"lvsctl: --metrics-listen: cannot listen on " + busy.Addr().String() + ": bind: address already in use (see lvsctl run --help)"},
		{[]string{"run", "--metrics-listen", "--drain-timeout", "0", file},
			"lvsctl: --metrics-listen needs a value (HOST:PORT), not --drain-timeout; write --metrics-listen=--drain-timeout if --drain-timeout is its value (see lvsctl run --help)"},
		{[]string{"run", file, "--metrics-listen"},
			"lvsctl: --metrics-listen needs a value (HOST:PORT) (see lvsctl run --help)"},
		{[]string{"run", "--drain-timeout=-5s", file}, "lvsctl: --drain-timeout: -5s is negative (see lvsctl run --help)"},
		{[]string{"plan", "--drain-timeout=-5s", file}, "lvsctl: --drain-timeout: -5s is negative (see lvsctl plan --help)"},
		{[]string{"apply", "--drain-timeout=-1m30s", file}, "lvsctl: --drain-timeout: -1m30s is negative (see lvsctl apply --help)"},
		{[]string{"apply", "--drain-timeout"}, "lvsctl: --drain-timeout needs a value (a duration such as 5m) (see lvsctl apply --help)"},
		{[]string{"apply", "--max-delete", "101", file}, "lvsctl: --max-delete: 101 is not a percentage from 0 to 100 (see lvsctl apply --help)"},
		{[]string{"plan", "--max-delete=-1", file}, "lvsctl: --max-delete: -1 is not a percentage from 0 to 100 (see lvsctl plan --help)"},
		{[]string{"run", "--checks", filepath.Join(dir, "absent.yaml"), file},
			"lvsctl: --checks: " + filepath.Join(dir, "absent.yaml") + ": no such file or directory (see lvsctl run --help)"},
		{[]string{"run", "--checks", dir, file}, "lvsctl: --checks: " + dir + " is a directory, not a file (see lvsctl run --help)"},
		{[]string{"apply", "--journal-dir", notDir, file}, "lvsctl: --journal-dir: " + notDir + " is not a directory (see lvsctl apply --help)"},
		{[]string{"status", "--journal-dir", notDir}, "lvsctl: --journal-dir: " + notDir + " is not a directory (see lvsctl status --help)"},
		{[]string{"top", "-b", "-d", "0.01"}, "lvsctl: --delay: 0.01 is too short; give seconds or a duration of at least 0.1s (see lvsctl top --help)"},
		{[]string{"top", "-b", "--iterations=-1"}, "lvsctl: --iterations: -1 is negative; give 0 (print until interrupted) or a number of frames (see lvsctl top --help)"},
		{[]string{"top", "-b", "-d"}, "lvsctl: --delay: no value; give seconds or a duration (see lvsctl top --help)"},
	} {
		r := run(t, env, "", tc.args...)
		code := exitUsage
		if tc.args[0] == "status" {
			code = statusUnknown // a monitoring plugin's usage error
		}
		if r.code != code || r.stderr != tc.want+"\n" || r.stdout != "" {
			t.Errorf("lvsctl %s: exit %d, stderr %q, stdout %q;\nwant exit %d, stderr %q", strings.Join(tc.args, " "), r.code, r.stderr, r.stdout, code, tc.want+"\n")
		}
		if s := saveOf(t, f); s != "" {
			t.Fatalf("lvsctl %s changed the table:\n%s", strings.Join(tc.args, " "), s)
		}
	}
}

// TestGoodFlagsPass: the checks refuse nothing a user may mean.
func TestGoodFlagsPass(t *testing.T) {
	old := lookupHost
	lookupHost = func(context.Context, string) ([]string, error) { return []string{"127.0.0.1"}, nil }
	defer func() { lookupHost = old }()
	addrs := []string{"127.0.0.1:0", "localhost:0", ":0"}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil { // a host with IPv6
		ln.Close()
		addrs = append(addrs, "[::1]:0")
	}
	for _, addr := range addrs {
		if err := checkListen("--metrics-listen", addr); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
	var p planFlags
	p.MaxDelete = 100
	if err := p.validate(); err != nil {
		t.Errorf("--drain-timeout 0 --max-delete 100: %v", err)
	}
}

// TestHelpPointsAtTheFullCommand: an error under "import keepalived"
// points at that command's help, which exists.
func TestHelpPointsAtTheFullCommand(t *testing.T) {
	env := testEnv(t, nil)
	r := run(t, env, "", "import", "keepalived")
	if want := "lvsctl: expected \"<FILE>\" (see lvsctl import keepalived --help)\n"; r.code != exitUsage || r.stderr != want {
		t.Fatalf("import keepalived: exit %d, stderr %q; want 2, %q", r.code, r.stderr, want)
	}
	if h := run(t, env, "", "import", "keepalived", "--help"); h.code != exitOK || !strings.Contains(h.stdout, "Usage: lvsctl import keepalived") {
		t.Fatalf("the help it points at: %+v", h)
	}
}

// TestHelpTexts: status's help tells its record and exit statuses; plan
// and apply name every format FILE may be in; list points at the installed
// documentation.
func TestHelpTexts(t *testing.T) {
	env := testEnv(t, nil)
	h := run(t, env, "", "status", "--help")
	for _, want := range []string{"lvsctl run's health record", "drains pending",
		"  0  every checked real server in service and no drain pending\n",
		"  1  a real server held out or draining, a drain pending, a refused reload,\n",
		"  2  a service whose real servers all failed (ALL REAL SERVERS ... FAILED)\n",
		"  3  the record or the journal could not be read, or a bad command line\n"} {
		if !strings.Contains(h.stdout, want) {
			t.Errorf("status --help lacks %q:\n%s", want, h.stdout)
		}
	}
	for _, cmd := range []string{"plan", "apply"} {
		h := run(t, env, "", cmd, "--help")
		if !strings.Contains(h.stdout, "ipvsadm-save text, or lvsctl JSON or YAML") {
			t.Errorf("%s --help does not name YAML:\n%s", cmd, h.stdout)
		}
	}
	if h := run(t, env, "", "list", "--help"); !strings.Contains(h.stdout, "(/usr/share/doc/lvskit/lvsctl.md)") {
		t.Errorf("list --help does not point at the installed lvsctl.md:\n%s", h.stdout)
	}
	if h := run(t, env, "", "--help"); !strings.Contains(h.stdout, "or the same document in YAML") {
		t.Errorf("--help does not name YAML:\n%s", h.stdout)
	}
}
