package packaging_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/packaging/hosttool"
)

// serviceRun runs ipvsadm-service with a fake ipvsadm that logs its
// arguments (one call per line), keeps what -R reads, answers -S -n with a
// fixed table, and exits 2 for the one argument list given in fail.
type serviceRun struct {
	config string // contents of /etc/default/ipvsadm, "" for no file
	rules  string // contents of /etc/ipvsadm.rules, "" for no file
	fail   string // ipvsadm arguments (joined with spaces) that fail
}

const fakeSave = "-A -t 10.0.0.1:80 -s wlc\n-a -t 10.0.0.1:80 -r 192.168.1.1:80 -m -w 1\n"

func (r serviceRun) run(t *testing.T, action string) (calls []string, stdin map[string]string, out string, status int) {
	t.Helper()
	dir := t.TempDir()
	fake := filepath.Join(dir, "ipvsadm")
	script := `#!/bin/sh
echo "$*" >> "$LOG"
case "$*" in
"-R") cat > "$LOG.stdin.R" ;;
"-S -n") cat <<'TABLE'
` + fakeSave + `TABLE
	;;
esac
[ "$*" = "$FAIL" ] && exit 2
exit 0
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "default")
	if r.config != "" {
		if err := os.WriteFile(config, []byte(r.config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rules := filepath.Join(dir, "ipvsadm.rules")
	if r.rules != "" {
		if err := os.WriteFile(rules, []byte(r.rules), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(dir, "log")
	cmd := exec.Command("sh", "ipvsadm-service", action)
	cmd.Env = append(os.Environ(), "IPVSADM="+fake, "IPVSADM_RULES="+rules, "IPVSADM_CONFIG="+config,
		"LOG="+log, "FAIL="+r.fail)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		status = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(log); err == nil {
		calls = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	stdin = map[string]string{}
	if b, err := os.ReadFile(log + ".stdin.R"); err == nil {
		stdin["-R"] = string(b)
	}
	if b, err := os.ReadFile(rules); err == nil {
		stdin["rules"] = string(b)
	}
	return calls, stdin, buf.String(), status
}

// TestServiceHelper checks that the script the units run honours
// /etc/default/ipvsadm as Debian's /etc/init.d/ipvsadm does: AUTO gates
// loading (flush, then the rules without '#' lines into ipvsadm -R) and
// clearing; DAEMON none|master|backup|both picks the sync daemons, started
// on IFACE with SYNCID (defaults eth0 and 0); saving on stop is the lvskit
// addition, switched off by SAVE_ON_STOP=false.
func TestServiceHelper(t *testing.T) {
	t.Parallel()
	hosttool.Require(t, "sh", "dash")
	rules := "# ipvsadm.rules\n-A -t 10.0.0.9:80 -s rr\n#-A -t 10.0.0.10:80\n-a -t 10.0.0.9:80 -r 10.1.1.1 -m\n"
	tests := []struct {
		name      string
		r         serviceRun
		action    string
		calls     []string
		restored  string // what ipvsadm -R read
		saved     string // the rules file afterwards ("" = not checked)
		status    int
		outRegexp string
	}{
		{name: "start without config does nothing", action: "start", calls: nil, outRegexp: "AUTO is not \"true\""},
		{name: "start AUTO=false does nothing", r: serviceRun{config: `AUTO="false"`, rules: rules}, action: "start", calls: nil},
		{name: "start AUTO=true flushes and loads", r: serviceRun{config: `AUTO="true"`, rules: rules}, action: "start",
			calls: []string{"-C", "-R"}, restored: "-A -t 10.0.0.9:80 -s rr\n-a -t 10.0.0.9:80 -r 10.1.1.1 -m\n"},
		{name: "reload AUTO=true flushes and loads", r: serviceRun{config: `AUTO="true"`, rules: rules}, action: "reload",
			calls: []string{"-C", "-R"}, restored: "-A -t 10.0.0.9:80 -s rr\n-a -t 10.0.0.9:80 -r 10.1.1.1 -m\n"},
		{name: "start AUTO=true without rules file", r: serviceRun{config: `AUTO="true"`}, action: "start",
			calls: []string{"-C"}, outRegexp: "does not exist"},
		{name: "start fails when the flush fails", r: serviceRun{config: `AUTO="true"`, rules: rules, fail: "-C"}, action: "start",
			calls: []string{"-C"}, status: 2},
		{name: "start fails when the restore fails", r: serviceRun{config: `AUTO="true"`, rules: rules, fail: "-R"}, action: "start",
			calls: []string{"-C", "-R"}, restored: "-A -t 10.0.0.9:80 -s rr\n-a -t 10.0.0.9:80 -r 10.1.1.1 -m\n", status: 2},
		{name: "stop AUTO=false does nothing", r: serviceRun{config: `AUTO="false"`, rules: rules}, action: "stop", calls: nil, saved: rules},
		{name: "stop AUTO=true saves then flushes", r: serviceRun{config: `AUTO="true"`, rules: rules}, action: "stop",
			calls: []string{"-S -n", "-C"}, saved: "# ipvsadm.rules\n" + fakeSave},
		{name: "stop SAVE_ON_STOP=false only flushes", r: serviceRun{config: "AUTO=\"true\"\nSAVE_ON_STOP=\"false\"", rules: rules}, action: "stop",
			calls: []string{"-C"}, saved: rules},
		{name: "failed save keeps the old rules", r: serviceRun{config: `AUTO="true"`, rules: rules, fail: "-S -n"}, action: "stop",
			calls: []string{"-S -n", "-C"}, saved: rules, status: 1, outRegexp: "left unchanged"},
		{name: "sync-start none", r: serviceRun{config: `DAEMON="none"`}, action: "sync-start", calls: nil, outRegexp: "no sync daemon"},
		{name: "sync-start default config", action: "sync-start", calls: nil},
		{name: "sync-start master defaults", r: serviceRun{config: `DAEMON="master"`}, action: "sync-start",
			calls: []string{"--start-daemon master --mcast-interface eth0 --syncid 0"}},
		{name: "sync-start backup with IFACE and SYNCID", r: serviceRun{config: "DAEMON=\"backup\"\nIFACE=\"eth1\"\nSYNCID=\"7\""}, action: "sync-start",
			calls: []string{"--start-daemon backup --mcast-interface eth1 --syncid 7"}},
		{name: "sync-start both", r: serviceRun{config: "DAEMON=both\nIFACE=bond0"}, action: "sync-start",
			calls: []string{"--start-daemon master --mcast-interface bond0 --syncid 0", "--start-daemon backup --mcast-interface bond0 --syncid 0"}},
		{name: "sync-start both, master fails, backup still starts", r: serviceRun{config: "DAEMON=both", fail: "--start-daemon master --mcast-interface eth0 --syncid 0"},
			action: "sync-start", calls: []string{"--start-daemon master --mcast-interface eth0 --syncid 0", "--start-daemon backup --mcast-interface eth0 --syncid 0"}, status: 1},
		{name: "sync-stop both", r: serviceRun{config: "DAEMON=both"}, action: "sync-stop",
			calls: []string{"--stop-daemon master", "--stop-daemon backup"}},
		{name: "sync-stop master", r: serviceRun{config: "DAEMON=master"}, action: "sync-stop", calls: []string{"--stop-daemon master"}},
		{name: "sync-start bad DAEMON", r: serviceRun{config: "DAEMON=primary"}, action: "sync-start", calls: nil, outRegexp: "not none, master, backup or both"},
		{name: "unknown action", action: "restart", calls: nil, status: 2, outRegexp: "usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, files, out, status := tt.r.run(t, tt.action)
			if !slices.Equal(calls, tt.calls) {
				t.Errorf("ipvsadm calls %q, want %q\noutput:\n%s", calls, tt.calls, out)
			}
			if status != tt.status {
				t.Errorf("exit status %d, want %d\noutput:\n%s", status, tt.status, out)
			}
			if tt.restored != "" && files["-R"] != tt.restored {
				t.Errorf("ipvsadm -R read %q, want %q", files["-R"], tt.restored)
			}
			if tt.saved != "" && files["rules"] != tt.saved {
				t.Errorf("rules file is %q, want %q", files["rules"], tt.saved)
			}
			if tt.outRegexp != "" && !regexp.MustCompile(tt.outRegexp).MatchString(out) {
				t.Errorf("output %q does not match %q", out, tt.outRegexp)
			}
		})
	}
}

// TestUnits verifies the unit files with systemd-analyze (pointing their
// commands at this tree's helper, which the package installs at the path
// the units name) and checks the properties the package relies on.
func TestUnits(t *testing.T) {
	t.Parallel()
	hosttool.Require(t, "systemd-analyze", "systemd")
	helper, err := filepath.Abs("ipvsadm-service")
	if err != nil {
		t.Fatal(err)
	}
	nfpm, err := os.ReadFile("nfpm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const installed = "/usr/libexec/lvskit/ipvsadm-service"
	if !strings.Contains(string(nfpm), "dst: "+installed+"\n") {
		t.Fatalf("nfpm.yaml does not install the helper at %s", installed)
	}
	dir := t.TempDir()
	var units []string
	for _, u := range []string{"ipvsadm.service", "ipvsadm-sync.service"} {
		src, err := os.ReadFile(filepath.Join("systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(nfpm), "dst: /lib/systemd/system/"+u+"\n") {
			t.Errorf("nfpm.yaml does not install %s", u)
		}
		for _, want := range []string{"Type=oneshot\n", "RemainAfterExit=yes\n", "ExecStart=" + installed + " ",
			"ExecStop=" + installed + " ", "WantedBy=multi-user.target\n", "Documentation=man:ipvsadm(8)"} {
			if !strings.Contains(string(src), want) {
				t.Errorf("%s lacks %q", u, want)
			}
		}
		p := filepath.Join(dir, u)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(src), installed, helper)), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, p)
	}
	cmd := exec.Command("systemd-analyze", append([]string{"verify", "--man=no"}, units...)...)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
