package packaging_test

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/packaging/hosttool"
)

// serviceRun runs ipvsadm-service with a fake ipvsadm (also installed as
// ipvsadm-save and ipvsadm-restore) that logs its name and arguments (one
// call per line), keeps what ipvsadm-restore reads, answers ipvsadm-save
// -n with a table, and exits 2 for the one call given in fail. A fake
// unshare runs its command with IN_SCRATCH=1, where the fake answers with
// the scratch table and listing when they are set.
type serviceRun struct {
	config string // contents of /etc/default/ipvsadm, "" for no file
	rules  string // contents of /etc/ipvsadm.rules, "" for no file
	// rulesMode is the rules file's mode (0644 when 0).
	rulesMode os.FileMode
	fail      string // the call (name and arguments joined with spaces) that fails
	empty     bool   // the table is empty
	// In the scratch namespace: a different save output or listing.
	scratchTable, scratchList string
	// marker: a start failed before (the marker exists)
	marker bool
	// emptyFile: the rules file exists with 0 bytes
	emptyFile bool
}

const fakeSave = "-A -t 10.0.0.1:80 -s wlc\n-a -t 10.0.0.1:80 -r 192.168.1.1:80 -m -w 1\n"

const fakeList = `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port            Uthreshold Lthreshold ActiveConn InActConn
  -> RemoteAddress:Port
TCP  10.0.0.1:80 wlc
  -> 192.168.1.1:80               0          0          3          7
`

type serviceResult struct {
	calls     []string
	restored  string // what ipvsadm-restore read
	rules     string // the rules file afterwards
	rulesMode os.FileMode
	out       string
	status    int
	marker    bool     // the failed-start marker exists afterwards
	leftovers []string // files in the rules directory other than the rules
}

func (r serviceRun) run(t *testing.T, action string) serviceResult {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	etc := filepath.Join(dir, "etc")
	for _, d := range []string{bin, etc} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fake := filepath.Join(bin, "ipvsadm")
	script := `#!/bin/sh
name=$(basename "$0")
args="$*"
call="$name${args:+ $args}"
[ "$name" = ipvsadm-restore ] && [ "${LVSKIT_RESTORE_STRICT:-}" = 1 ] && call="$call (strict)"
[ "$name" = ipvsadm-restore ] && [ "${LVSKIT_RESTORE_CHECK:-}" = 1 ] && call="$call (check)"
[ "$name" = ipvsadm-restore ] && [ "${LVSKIT_RESTORE_PROOF:-}" = off ] && call="$call (proof off)"
[ -n "${IN_SCRATCH:-}" ] && call="$call (scratch)"
echo "$call" >> "$LOG"
case "$name${args:+ $args}" in
"ipvsadm-restore") cat > "$LOG.stdin.R" ;;
"ipvsadm-save -n")
	if [ -n "${IN_SCRATCH:-}" ] && [ -n "$SCRATCH_TABLE" ]; then printf '%s' "$SCRATCH_TABLE"; else printf '%s' "$TABLE"; fi ;;
"ipvsadm -L -n --thresholds")
	if [ -n "${IN_SCRATCH:-}" ] && [ -n "$SCRATCH_LIST" ]; then printf '%s' "$SCRATCH_LIST"; else printf '%s' "$LIST"; fi ;;
esac
[ "$call" = "$FAIL" ] && exit 2
exit 0
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"ipvsadm-save", "ipvsadm-restore"} {
		if err := os.Symlink("ipvsadm", filepath.Join(bin, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "ip"), []byte("#!/bin/sh\necho \"ip $*\" >> \"$LOG\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	unshare := filepath.Join(bin, "unshare")
	if err := os.WriteFile(unshare, []byte("#!/bin/sh\necho \"unshare $1\" >> \"$LOG\"\nwhile [ \"$1\" != -- ]; do shift; done\nshift\nIN_SCRATCH=1 exec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(etc, "default")
	if r.config != "" {
		if err := os.WriteFile(config, []byte(r.config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rules := filepath.Join(etc, "ipvsadm.rules")
	if r.rules != "" || r.emptyFile {
		mode := r.rulesMode
		if mode == 0 {
			mode = 0o644
		}
		if err := os.WriteFile(rules, []byte(r.rules), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(rules, mode); err != nil {
			t.Fatal(err)
		}
	}
	rundir := filepath.Join(dir, "run")
	if r.marker {
		if err := os.Mkdir(rundir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rundir, "start-failed"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(dir, "log")
	table, list := fakeSave, fakeList
	if r.empty {
		table, list = "", strings.Join(strings.SplitAfter(fakeList, "\n")[:3], "")
	}
	cmd := exec.Command("sh", "ipvsadm-service", action)
	cmd.Env = append(os.Environ(), "IPVSADM="+fake, "IPVSADM_SAVE="+fake+"-save", "IPVSADM_RESTORE="+fake+"-restore",
		"UNSHARE="+unshare, "IP="+filepath.Join(bin, "ip"), "IPVSADM_RULES="+rules, "IPVSADM_CONFIG="+config, "IPVSADM_RUNDIR="+rundir,
		"LOG="+log, "FAIL="+r.fail, "TABLE="+table, "LIST="+list, "SCRATCH_TABLE="+r.scratchTable, "SCRATCH_LIST="+r.scratchList)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	res := serviceResult{out: buf.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.status = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(log); err == nil {
		res.calls = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	if b, err := os.ReadFile(log + ".stdin.R"); err == nil {
		res.restored = string(b)
	}
	if b, err := os.ReadFile(rules); err == nil {
		res.rules = string(b)
	}
	if fi, err := os.Stat(rules); err == nil {
		res.rulesMode = fi.Mode().Perm()
	}
	if _, err := os.Stat(filepath.Join(rundir, "start-failed")); err == nil {
		res.marker = true
	}
	entries, err := os.ReadDir(etc)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "ipvsadm.rules" && e.Name() != "default" {
			res.leftovers = append(res.leftovers, e.Name())
		}
	}
	return res
}

// TestServiceHelper checks that the script the units run honours
// /etc/default/ipvsadm as Debian's /etc/init.d/ipvsadm does: AUTO gates
// loading (through ipvsadm-restore, which drops '#' lines, checks, tries
// the file in a scratch namespace, flushes and restores) and clearing;
// load, save, status and rate act whatever AUTO says; DAEMON
// none|master|backup|both picks the sync daemons, started on IFACE with
// SYNCID (defaults eth0 and 0). The stop saves only with
// SAVE_ON_STOP=true; the save's safeguards are checked here too.
func TestServiceHelper(t *testing.T) {
	t.Parallel()
	hosttool.Require(t, "sh", "dash")
	rules := "# ipvsadm.rules\n-A -t 10.0.0.9:80 -s rr\n#-A -t 10.0.0.10:80\n-a -t 10.0.0.9:80 -r 10.1.1.1 -m\n"
	auto := `AUTO="true"`
	save := []string{"ipvsadm-save -n", "unshare --net", "ip link set lo up", "ipvsadm-restore (proof off) (scratch)", "ipvsadm-save -n (scratch)",
		"ipvsadm -L -n --thresholds (scratch)", "ipvsadm -L -n --thresholds"}
	saved := "# ipvsadm.rules\n" + fakeSave
	tests := []struct {
		name      string
		r         serviceRun
		action    string
		calls     []string
		restored  string // what ipvsadm-restore read ("" = not checked)
		saved     string // the rules file afterwards ("" = not checked)
		mode      os.FileMode
		status    int
		marker    bool
		outRegexp string
	}{
		{name: "start without config does nothing", action: "start", calls: nil, outRegexp: "AUTO is not \"true\""},
		{name: "start AUTO=false does nothing", r: serviceRun{config: `AUTO="false"`, rules: rules}, action: "start", calls: nil},
		{name: "start AUTO=true restores", r: serviceRun{config: auto, rules: rules}, action: "start",
			calls: []string{"ipvsadm-restore"}, restored: rules},
		{name: "reload AUTO=true restores", r: serviceRun{config: auto, rules: rules}, action: "reload",
			calls: []string{"ipvsadm-restore"}, restored: rules},
		{name: "load restores whatever AUTO says", r: serviceRun{config: `AUTO="false"`, rules: rules}, action: "load",
			calls: []string{"ipvsadm-restore"}, restored: rules},
		{name: "load without config restores", r: serviceRun{rules: rules}, action: "load",
			calls: []string{"ipvsadm-restore"}, restored: rules},
		{name: "LVSKIT_RESTORE_PROOF=off in the config reaches the restore", r: serviceRun{config: auto + "\nLVSKIT_RESTORE_PROOF=off", rules: rules}, action: "start",
			calls: []string{"ipvsadm-restore (proof off)"}, restored: rules},
		{name: "a successful start removes the marker", r: serviceRun{config: auto, rules: rules, marker: true}, action: "start",
			calls: []string{"ipvsadm-restore"}, restored: rules},
		{name: "start AUTO=true without rules file flushes", r: serviceRun{config: auto}, action: "start",
			calls: []string{"ipvsadm -C"}, outRegexp: "does not exist"},
		{name: "start from an empty file fails, table untouched", r: serviceRun{config: auto, emptyFile: true}, action: "start",
			calls: nil, status: 1, marker: true, outRegexp: "is empty \\(0 bytes\\); the table was left alone"},
		{name: "start fails when the restore fails", r: serviceRun{config: auto, rules: rules, fail: "ipvsadm-restore"}, action: "start",
			calls: []string{"ipvsadm-restore"}, restored: rules, status: 1, marker: true, outRegexp: "will not be saved"},
		{name: "load fails when the restore fails", r: serviceRun{rules: rules, fail: "ipvsadm-restore"}, action: "load",
			calls: []string{"ipvsadm-restore"}, restored: rules, status: 1, marker: true, outRegexp: "will not be saved"},
		{name: "stop AUTO=false does nothing", r: serviceRun{config: `AUTO="false"`, rules: rules}, action: "stop", calls: nil, saved: rules},
		{name: "stop AUTO=true only flushes", r: serviceRun{config: auto, rules: rules}, action: "stop",
			calls: []string{"ipvsadm -C"}, saved: rules},
		{name: "stop SAVE_ON_STOP=true saves then flushes", r: serviceRun{config: auto + "\nSAVE_ON_STOP=\"true\"", rules: rules}, action: "stop",
			calls: append(save, "ipvsadm -C"), saved: saved, mode: 0o644},
		{name: "stop SAVE_ON_STOP=true: a failed save keeps the old rules, still flushes", r: serviceRun{config: auto + "\nSAVE_ON_STOP=true", rules: rules, fail: "ipvsadm-save -n"}, action: "stop",
			calls: []string{"ipvsadm-save -n", "ipvsadm -C"}, saved: rules, status: 1, outRegexp: "left unchanged"},
		{name: "stop SAVE_ON_STOP=true: no save after a failed start", r: serviceRun{config: auto + "\nSAVE_ON_STOP=true", rules: rules, marker: true}, action: "stop",
			calls: []string{"ipvsadm -C"}, saved: rules, status: 1, marker: true, outRegexp: "last load failed"},
		{name: "save saves", r: serviceRun{rules: rules}, action: "save", calls: save, saved: saved, mode: 0o644},
		{name: "save keeps the old file's mode", r: serviceRun{config: auto, rules: rules, rulesMode: 0o600}, action: "save",
			calls: save, saved: saved, mode: 0o600},
		{name: "save creates the file", action: "save", calls: save, saved: saved, mode: 0o644},
		{name: "failed save keeps the old rules", r: serviceRun{rules: rules, fail: "ipvsadm-save -n"}, action: "save",
			calls: []string{"ipvsadm-save -n"}, saved: rules, status: 1, outRegexp: "left unchanged"},
		{name: "no save after a failed start", r: serviceRun{rules: rules, marker: true}, action: "save",
			calls: nil, saved: rules, status: 1, marker: true, outRegexp: "last load failed"},
		{name: "an empty table does not replace rules", r: serviceRun{rules: rules, empty: true}, action: "save",
			calls: []string{"ipvsadm-save -n"}, saved: rules, status: 1, outRegexp: "SAVE_EMPTY"},
		{name: "SAVE_EMPTY=true saves an empty table", r: serviceRun{config: "SAVE_EMPTY=true", rules: rules, empty: true}, action: "save",
			calls: save, saved: "# ipvsadm.rules\n"},
		{name: "an empty table replaces a file without rules", r: serviceRun{rules: "# ipvsadm.rules\n", empty: true}, action: "save",
			calls: save, saved: "# ipvsadm.rules\n"},
		{name: "a save that restores differently is refused", r: serviceRun{rules: rules, scratchTable: "-A -t 10.0.0.1:80 -s wlc\n"}, action: "save",
			calls: save[:6], saved: rules, status: 1, outRegexp: "different table"},
		{name: "lost thresholds are refused", r: serviceRun{rules: rules, scratchList: strings.Replace(fakeList, "0          0          3", "9          0          3", 1)}, action: "save",
			calls: save, saved: rules, status: 1, outRegexp: "thresholds"},
		{name: "a save that does not restore is refused", r: serviceRun{rules: rules, fail: "ipvsadm-restore (proof off) (scratch)"}, action: "save",
			calls: save[:4], saved: rules, status: 1, outRegexp: "scratch network namespace"},
		{name: "VERIFY_SAVE=parse checks the lines only", r: serviceRun{config: "VERIFY_SAVE=parse", rules: rules}, action: "save",
			calls: []string{"ipvsadm-save -n", "ipvsadm-restore (check)"}, saved: saved},
		{name: "status lists the table", r: serviceRun{rules: rules}, action: "status", calls: []string{"ipvsadm -L -n"}, saved: rules},
		{name: "status fails with ipvsadm", r: serviceRun{fail: "ipvsadm -L -n"}, action: "status", calls: []string{"ipvsadm -L -n"}, status: 2},
		{name: "rate lists the rates", r: serviceRun{config: auto}, action: "rate", calls: []string{"ipvsadm -L -n --rate"}},
		{name: "sync-start none", r: serviceRun{config: `DAEMON="none"`}, action: "sync-start", calls: nil, outRegexp: "no sync daemon"},
		{name: "sync-start default config", action: "sync-start", calls: nil},
		{name: "sync-start master defaults", r: serviceRun{config: `DAEMON="master"`}, action: "sync-start",
			calls: []string{"ipvsadm --start-daemon master --mcast-interface eth0 --syncid 0"}},
		{name: "sync-start backup with IFACE and SYNCID", r: serviceRun{config: "DAEMON=\"backup\"\nIFACE=\"eth1\"\nSYNCID=\"7\""}, action: "sync-start",
			calls: []string{"ipvsadm --start-daemon backup --mcast-interface eth1 --syncid 7"}},
		{name: "sync-start both", r: serviceRun{config: "DAEMON=both\nIFACE=bond0"}, action: "sync-start",
			calls: []string{"ipvsadm --start-daemon master --mcast-interface bond0 --syncid 0", "ipvsadm --start-daemon backup --mcast-interface bond0 --syncid 0"}},
		{name: "sync-start both, master fails, backup still starts", r: serviceRun{config: "DAEMON=both", fail: "ipvsadm --start-daemon master --mcast-interface eth0 --syncid 0"},
			action: "sync-start", calls: []string{"ipvsadm --start-daemon master --mcast-interface eth0 --syncid 0", "ipvsadm --start-daemon backup --mcast-interface eth0 --syncid 0"}, status: 1},
		{name: "sync-stop both", r: serviceRun{config: "DAEMON=both"}, action: "sync-stop",
			calls: []string{"ipvsadm --stop-daemon master", "ipvsadm --stop-daemon backup"}},
		{name: "sync-stop master", r: serviceRun{config: "DAEMON=master"}, action: "sync-stop", calls: []string{"ipvsadm --stop-daemon master"}},
		{name: "sync-start bad DAEMON", r: serviceRun{config: "DAEMON=primary"}, action: "sync-start", calls: nil, outRegexp: "not none, master, backup or both"},
		{name: "unknown action", action: "restart", calls: nil, status: 2,
			outRegexp: "usage: .*ipvsadm-service start\\|stop\\|reload\\|load\\|save\\|status\\|rate\\|sync-start\\|sync-stop\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.r.run(t, tt.action)
			if !slices.Equal(res.calls, tt.calls) {
				t.Errorf("calls %q, want %q\noutput:\n%s", res.calls, tt.calls, res.out)
			}
			if res.status != tt.status {
				t.Errorf("exit status %d, want %d\noutput:\n%s", res.status, tt.status, res.out)
			}
			if tt.restored != "" && res.restored != tt.restored {
				t.Errorf("ipvsadm-restore read %q, want %q", res.restored, tt.restored)
			}
			if tt.saved != "" && res.rules != tt.saved {
				t.Errorf("rules file is %q, want %q", res.rules, tt.saved)
			}
			if tt.mode != 0 && res.rulesMode != tt.mode {
				t.Errorf("rules file mode %v, want %v", res.rulesMode, tt.mode)
			}
			if res.marker != tt.marker {
				t.Errorf("failed-start marker present: %v, want %v", res.marker, tt.marker)
			}
			if len(res.leftovers) > 0 {
				t.Errorf("files left beside the rules: %q", res.leftovers)
			}
			if tt.outRegexp != "" && !regexp.MustCompile(tt.outRegexp).MatchString(res.out) {
				t.Errorf("output %q does not match %q", res.out, tt.outRegexp)
			}
		})
	}
}

// TestShippedDefaultsDoNotSaveOnStop: with the packaged /etc/default/ipvsadm
// and AUTO switched on, a stop clears the table and leaves the rules file
// alone, as Debian's script does; the file says SAVE_ON_STOP="false".
func TestShippedDefaultsDoNotSaveOnStop(t *testing.T) {
	t.Parallel()
	hosttool.Require(t, "sh", "dash")
	b, err := os.ReadFile("default/ipvsadm")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nSAVE_ON_STOP=\"false\"\n") || !strings.Contains(string(b), "\nAUTO=\"false\"\n") {
		t.Fatalf("default/ipvsadm does not set AUTO=\"false\" and SAVE_ON_STOP=\"false\":\n%s", b)
	}
	rules := "# ipvsadm.rules\n-A -t 10.0.0.9:80 -s rr\n"
	config := strings.Replace(string(b), "\nAUTO=\"false\"\n", "\nAUTO=\"true\"\n", 1)
	res := serviceRun{config: config, rules: rules}.run(t, "stop")
	if !slices.Equal(res.calls, []string{"ipvsadm -C"}) || res.status != 0 || res.rules != rules {
		t.Errorf("stop with the shipped defaults and AUTO=true: calls %q, status %d, rules %q; want only the flush, 0, unchanged\n%s", res.calls, res.status, res.rules, res.out)
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
	// lvsctl run's unit: notify, reload by SIGHUP, a watchdog, disabled.
	src, err := os.ReadFile(filepath.Join("systemd", "lvsctl.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(nfpm), "dst: /lib/systemd/system/lvsctl.service\n") {
		t.Error("nfpm.yaml does not install lvsctl.service")
	}
	for _, want := range []string{"Type=notify\n", "ExecStart=/usr/sbin/lvsctl run /etc/lvsctl/director.yaml\n",
		"ExecReload=/bin/kill -HUP $MAINPID\n", "WatchdogSec=", "ConditionPathExists=/etc/lvsctl/director.yaml\n"} {
		if !strings.Contains(string(src), want) {
			t.Errorf("lvsctl.service lacks %q", want)
		}
	}
	p := filepath.Join(dir, "lvsctl.service")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(src), "/usr/sbin/lvsctl", helper)), 0o644); err != nil {
		t.Fatal(err)
	}
	units = append(units, p)
	cmd := exec.Command("systemd-analyze", append([]string{"verify", "--man=no"}, units...)...)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestRulesConffileFrozen: /etc/ipvsadm.rules is a conffile (so that it is
// handed over from Debian's ipvsadm and never left behind for that
// package's purge to delete) that the unit rewrites at every stop. dpkg
// asks about a conffile on upgrade only when the packaged version changed,
// so the packaged version must never change: this test pins it.
func TestRulesConffileFrozen(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("ipvsadm.rules")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%x", md5.Sum(b)); got != "fba76784463de4114680f6e1e0b86dd9" {
		t.Errorf("packaging/ipvsadm.rules changed (md5 %s): every upgrade would ask administrators about their saved rules", got)
	}
	nfpm, err := os.ReadFile("nfpm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(nfpm), "  - src: packaging/ipvsadm.rules\n    dst: /etc/ipvsadm.rules\n    type: config\n") {
		t.Error("nfpm.yaml does not ship packaging/ipvsadm.rules as the conffile /etc/ipvsadm.rules")
	}
}
