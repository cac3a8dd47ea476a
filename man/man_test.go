package man_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/packaging/hosttool"
	"github.com/lvskit/lvskit/rules/desired"
)

// pages are the manual pages the package installs.
var pages = []string{"ipvsadm.8", "ipvsadm-save.8", "ipvsadm-restore.8", "lvsprep.8", "lvsctl.8"}

func TestEveryPageIsListed(t *testing.T) {
	found, err := filepath.Glob("*.[1-9]")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(found)
	want := slices.Sorted(slices.Values(pages))
	if !slices.Equal(found, want) {
		t.Fatalf("pages in man/: %q, the test (and the package) know %q", found, want)
	}
}

// renderCheck runs a renderer and fails on any diagnostic output.
func renderCheck(t *testing.T, env []string, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Fatalf("%s %q warned:\n%s", name, args, stderr.String())
	}
	return stdout.Bytes()
}

// TestRenderWithoutWarnings renders every page with groff (all warnings
// enabled), with man-db as lintian does (its manpage check runs exactly this
// command with this environment), and with plain `man -l`.
func TestRenderWithoutWarnings(t *testing.T) {
	hosttool.Require(t, "groff", "groff")
	hosttool.Require(t, "man", "man-db")
	for _, p := range pages {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			renderCheck(t, nil, "groff", "-man", "-ww", "-z", p)
			renderCheck(t, []string{"LC_ALL=C.UTF-8", "MANROFFSEQ=", "MANWIDTH=80"},
				"man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", p)
			out := renderCheck(t, []string{"MANWIDTH=80", "MANPAGER=cat", "PAGER=cat"}, "man", "-l", p)
			if len(out) < 500 {
				t.Fatalf("man -l %s rendered only %d bytes", p, len(out))
			}
		})
	}
}

// rendered returns the page as man shows it, as plain text.
func rendered(t *testing.T, page string) string {
	t.Helper()
	out := renderCheck(t, []string{"MANWIDTH=200", "MANPAGER=cat", "PAGER=cat", "LC_ALL=C.UTF-8", "MAN_KEEP_FORMATTING="},
		"man", "--nh", "--nj", "-E", "ascii", "-l", page)
	return string(out)
}

// sections returns the headings of the page's .SH sections.
func sections(t *testing.T, page string) []string {
	t.Helper()
	src, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\.SH\s+"?([^"\n]+)"?$`).FindAllStringSubmatch(string(src), -1) {
		names = append(names, m[1])
	}
	return names
}

func TestRequiredSections(t *testing.T) {
	for _, p := range pages {
		got := sections(t, p)
		for _, want := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "EXAMPLES", "SEE ALSO"} {
			if !slices.Contains(got, want) {
				t.Errorf("%s has no %s section (sections: %q)", p, want, got)
			}
		}
	}
	got := sections(t, "ipvsadm.8")
	for _, want := range []string{"COMMANDS", "FILES", "LVSKIT ADDITIONS", "SCHEDULERS", "DEFAULTS"} {
		if !slices.Contains(got, want) {
			t.Errorf("ipvsadm.8 has no %s section", want)
		}
	}
}

// TestIpvsadmPageFacts checks the facts the page must state, as they appear
// in the rendered text: the corrected defaults, every exit status, the
// examples of the LVS paper (VS/NAT table) and the DR and TUN setups.
func TestIpvsadmPageFacts(t *testing.T) {
	hosttool.Require(t, "man", "man-db")
	text := rendered(t, "ipvsadm.8")
	flat := strings.Join(strings.Fields(text), " ")
	for _, want := range []string{
		// The seed paper's VS/NAT example, table and commands.
		"TCP 202.103.106.5:80 172.16.0.2:80 1",
		"172.16.0.3:8000 2",
		"TCP 202.103.106.5:21 172.16.0.3:21 1",
		"ipvsadm -A -t 202.103.106.5:80 -s wlc",
		"ipvsadm -a -t 202.103.106.5:80 -r 172.16.0.2:80 -m",
		"ipvsadm -a -t 202.103.106.5:80 -r 172.16.0.3:8000 -m -w 2",
		"ipvsadm -A -t 202.103.106.5:21",
		"ipvsadm -a -t 202.103.106.5:21 -r 172.16.0.3:21 -m",
		// Direct routing and tunnelling, with the real-server side.
		"ipvsadm -a -t 192.0.2.100:443 -r 192.0.2.11 -g",
		"ip address add 192.0.2.100/32 dev lo",
		"net.ipv4.conf.all.arp_ignore=1",
		"net.ipv4.conf.all.arp_announce=2",
		"ipvsadm -a -t 192.0.2.100:80 -r 203.0.113.21 -i",
		"ip address add 192.0.2.100/32 dev tunl0",
		"--tun-type gue",
		// Defaults that the upstream page and help get wrong.
		"Without a value the timeout is 360 seconds",
		"The default is 0",
		"The default is wlc",
		"the default is 1",
		"default is eth0",
		// Every exit status.
		"EXIT STATUS 0 ", " 1 A listing failed", " 2 The command line is invalid", " 255 The kernel refused",
		// Files.
		"/proc/net/ip_vs_conn", "/etc/ipvsadm.rules", "/etc/default/ipvsadm", "/etc/services",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("ipvsadm(8) does not say %q", want)
		}
	}
	for _, wrong := range []string{"default of 300", "default=255"} {
		if strings.Contains(flat, wrong) {
			t.Errorf("ipvsadm(8) repeats the upstream error %q", wrong)
		}
	}
}

// TestLvsctlPageFacts checks that lvsctl(8) documents every field of a
// check (taken from health.Spec) and of a service's failure settings, the
// defaults, status's exit statuses, run's reloads and where the user
// documentation is installed.
func TestLvsctlPageFacts(t *testing.T) {
	hosttool.Require(t, "man", "man-db")
	text := rendered(t, "lvsctl.8")
	flat := strings.Join(strings.Fields(text), " ")
	start, end := strings.Index(flat, "HEALTH CHECKS A check"), strings.Index(flat, "EXIT STATUS For every")
	if start < 0 || end < start {
		t.Fatalf("lvsctl(8) has no HEALTH CHECKS section before EXIT STATUS:\n%s", text)
	}
	section := flat[start:end]
	var fields []string
	for _, f := range reflect.VisibleFields(reflect.TypeOf(health.Spec{})) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		fields = append(fields, name)
	}
	for _, f := range reflect.VisibleFields(reflect.TypeOf(desired.JSONService{})) {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == "when_all_down" || name == "sorry_server" {
			fields = append(fields, name)
		}
	}
	if len(fields) < 20 {
		t.Fatalf("only %d check fields found: %q", len(fields), fields)
	}
	for _, f := range fields {
		if !regexp.MustCompile(`(^| )` + regexp.QuoteMeta(f) + `[ ,]`).MatchString(section) {
			t.Errorf("lvsctl(8)'s HEALTH CHECKS does not name the field %q", f)
		}
	}
	for _, want := range []string{
		// Defaults, from health's constants.
		"at least 100ms; default " + health.DefaultInterval.String(),
		"Default " + health.DefaultTimeout.String() + ", or half the interval",
		"back; default " + strconv.Itoa(health.DefaultRise),
		"out; default " + strconv.Itoa(health.DefaultFall),
		"(default " + health.DefaultPath + ")", "default " + health.DefaultExpect,
		"(default " + health.DefaultRecord + ")", "(default " + health.DefaultUser + ")",
		"keep (the default)",
		// status's exit statuses.
		"0 Every checked real server is in service and no drain is pending.",
		"1 Some real server is held out by its check or draining, a drain is pending, the last reload was refused, probes run late, or the run that wrote the record has stopped.",
		"2 A service has every real server failed (ALL REAL SERVERS ... FAILED)",
		"3 The record or the journal could not be read, or the command line is wrong.",
		// run's reloads.
		"A reload is checked as an apply is", "--max-delete", "A refused reload changes nothing: the running table and checks stay",
		// Where the documentation is.
		"/usr/share/doc/lvskit/lvsctl.md", "/usr/share/doc/lvskit/health.md",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("lvsctl(8) does not say %q", want)
		}
	}
	if strings.Contains(flat, "docs/lvsctl.md") || strings.Contains(flat, "docs/health.md") {
		t.Error("lvsctl(8) points at the source tree's docs/ instead of /usr/share/doc/lvskit")
	}
}
