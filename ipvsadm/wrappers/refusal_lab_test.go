//go:build lab

package wrappers

// A rules file with a line the kernel refuses never leaves the table
// emptier: ipvsadm-restore tries the file in a scratch network namespace
// first, and the unit loads through it. The unit's stop no longer saves
// unless asked.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lvskit/lvskit/lab/labtest"
)

// liveTable is a director's table of several services: TCP and UDP,
// persistent, with masqueraded, routed and tunnelled real servers.
const liveTable = "-A -t 10.7.0.1:80 -s wrr\n-a -t 10.7.0.1:80 -r 192.168.7.1:8080 -m -w 3\n-a -t 10.7.0.1:80 -r 192.168.7.2:8080 -m -w 0\n" +
	"-A -t 10.7.0.2:443 -s sh -b sh-port -p 600\n-a -t 10.7.0.2:443 -r 192.168.7.3:443 -g\n" +
	"-A -u 10.7.0.3:53 -s lc\n-a -u 10.7.0.3:53 -r 192.168.7.4:53 -i -w 5\n" +
	"-A -f 7 -s rr\n-a -f 7 -r 192.168.7.5 -g\n"

// refSave is the table as Debian's ipvsadm -Sn prints it.
func refSave(t *testing.T) string {
	t.Helper()
	r := labtest.Run(t, "", labtest.RefIpvsadm, "-Sn")
	if r.Code != 0 || r.Stderr != "" {
		t.Fatalf("ipvsadm -Sn: %+v", r)
	}
	return r.Stdout
}

// refusedFile is a rules file with one line the kernel refuses.
type refusedFile struct {
	name, rules string
	line        int    // the refused line's number in the file
	message     string // what ipvsadm prints for it
}

// refusedFiles: an unknown scheduler, an unknown persistence engine, and
// a refused line after 2,000 good ones.
func refusedFiles() []refusedFile {
	const notFound = "Scheduler or persistence engine not found"
	many := "# ipvsadm.rules\n" + services(400, 4, 8)
	return []refusedFile{
		{"unknown scheduler", "# ipvsadm.rules\n-A -t 10.1.1.2:80 -s rr\n-A -t 10.1.1.1:80 -s wrrr\n-a -t 10.1.1.2:80 -r 192.168.1.1:80 -m\n", 3, notFound},
		{"unknown persistence engine", "-A -u 10.1.1.3:5060 -p 60 --pe nosuch\n-A -t 10.1.1.4:80\n", 1, notFound},
		{"after many good lines", many + "-A -t 10.1.1.1:80 -s wrrr\n", strings.Count(many, "\n") + 1, notFound},
	}
}

// TestRestoreRefusedLineLeavesTable: ipvsadm-restore of a file with one
// line the kernel refuses leaves a live table byte for byte as it was
// (ipvsadm -Sn), prints ipvsadm's message for the line, then the count
// and the line's number, and exits 1. LVSKIT_RESTORE_STRICT=1 changes
// nothing; LVSKIT_RESTORE_PROOF=off flushes and restores the other lines,
// as Debian's script does, and still fails naming the line.
func TestRestoreRefusedLineLeavesTable(t *testing.T) {
	labtest.Netns(t)
	restoreInput(t, liveTable)
	before := refSave(t)
	for _, f := range refusedFiles() {
		for _, env := range [][]string{nil, {"LVSKIT_RESTORE_STRICT=1"}} {
			cmd := exec.Command(labtest.Ours("ipvsadm-restore"))
			cmd.Env = append(os.Environ(), env...)
			r := labtest.RunCmd(t, cmd, labtest.RunOptions{Stdin: f.rules})
			t.Logf("%s %v: status %d, stderr %q", f.name, env, r.Code, r.Stderr)
			want := fmt.Sprintf("%s\nipvsadm-restore: 1 line failed (input line %d) in a trial restore into an empty scratch network namespace\n"+
				"ipvsadm-restore: input refused; the IPVS table was not changed\n", f.message, f.line)
			if r.Code != 1 || r.Stdout != "" || r.Stderr != want {
				t.Errorf("%s %v: status %d, stdout %q, stderr %q; want 1, nothing, %q", f.name, env, r.Code, r.Stdout, r.Stderr, want)
			}
			if after := refSave(t); after != before {
				t.Errorf("%s %v: the table changed:\n%s\nwant\n%s", f.name, env, after, before)
			}
		}
	}

	// Without the trial, Debian's way: flushed, the other lines restored.
	f := refusedFiles()[0]
	cmd := exec.Command(labtest.Ours("ipvsadm-restore"))
	cmd.Env = append(os.Environ(), "LVSKIT_RESTORE_PROOF=off")
	r := labtest.RunCmd(t, cmd, labtest.RunOptions{Stdin: f.rules})
	want := fmt.Sprintf("%s\nipvsadm-restore: 1 line failed (input line %d); the table does not hold what they ask for\n", f.message, f.line)
	if r.Code != 1 || r.Stderr != want {
		t.Errorf("LVSKIT_RESTORE_PROOF=off: status %d, stderr %q; want 1, %q", r.Code, r.Stderr, want)
	}
	if got, want := refSave(t), "-A -t 10.1.1.2:80 -s rr\n-a -t 10.1.1.2:80 -r 192.168.1.1:80 -m -w 1\n"; got != want {
		t.Errorf("LVSKIT_RESTORE_PROOF=off: table %q, want the file without its refused line %q", got, want)
	}
}

// TestRestoreGoodFileAfterTrial: a file without refused lines replaces a
// live table exactly as Debian's script does (the same table and output),
// and the scratch namespace leaves nothing behind in the live one.
func TestRestoreGoodFileAfterTrial(t *testing.T) {
	rules := "# ipvsadm.rules\n" + services(50, 3, 9) + "-A -u 10.9.9.9:53 -s lc -p 60 -M 255.255.255.0\n-a -u 10.9.9.9:53 -r 192.168.9.9:53 -i -w 2\n"
	run := func(restore, ipvsadm string) func(t *testing.T) labtest.Result {
		return func(t *testing.T) labtest.Result {
			if r := labtest.RunClean(t, liveTable, ipvsadm, "-R"); r.Code != 0 {
				t.Fatalf("setup: %+v", r)
			}
			return labtest.RunClean(t, rules, restore)
		}
	}
	ref := labtest.InFreshNetns(t, "reference", run(labtest.RefIpvsadmRestore, labtest.RefIpvsadm))
	ours := labtest.InFreshNetns(t, "ours", run(labtest.Ours("ipvsadm-restore"), labtest.Ours("ipvsadm")))
	labtest.CompareOutcomes(t, "ipvsadm-restore of a good file over a live table", ref, ours, true)
	if ours.Run.Code != 0 || ours.Run.Stderr != "" {
		t.Errorf("ours: %+v", ours.Run)
	}
}

// TestRestoreWithoutNamespaceRights: a process that may change the IPVS
// table (CAP_NET_ADMIN) but not create namespaces (no CAP_SYS_ADMIN, as in
// many containers) has its restore refused with the table as it was,
// unless LVSKIT_RESTORE_PROOF=off.
func TestRestoreWithoutNamespaceRights(t *testing.T) {
	labtest.Netns(t)
	restoreInput(t, liveTable)
	before := refSave(t)
	netAdminOnly := func(env ...string) *exec.Cmd {
		cmd := exec.Command(labtest.Ours("ipvsadm-restore"))
		cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Credential:  &syscall.Credential{Uid: 65534, Gid: 65534},
			AmbientCaps: []uintptr{12}, // CAP_NET_ADMIN
		}
		return cmd
	}
	rules := "-A -t 10.1.1.5:80 -s rr\n"
	r := labtest.RunCmd(t, netAdminOnly(), labtest.RunOptions{Stdin: rules})
	t.Logf("CAP_NET_ADMIN only: status %d, stderr %q", r.Code, r.Stderr)
	if r.Code != 1 || !strings.Contains(r.Stderr, "unshare(CLONE_NEWNET): operation not permitted") ||
		!strings.Contains(r.Stderr, "the IPVS table was not changed (LVSKIT_RESTORE_PROOF=off restores without the trial)") {
		t.Errorf("CAP_NET_ADMIN only: %+v; want a refusal saying why and how to restore anyway", r)
	}
	if after := refSave(t); after != before {
		t.Errorf("the table changed:\n%s\nwant\n%s", after, before)
	}
	r = labtest.RunCmd(t, netAdminOnly("LVSKIT_RESTORE_PROOF=off"), labtest.RunOptions{Stdin: rules})
	if r.Code != 0 || r.Stderr != "" || refSave(t) != "-A -t 10.1.1.5:80 -s rr\n" {
		t.Errorf("CAP_NET_ADMIN only, LVSKIT_RESTORE_PROOF=off: %+v, table %q; want the file restored", r, refSave(t))
	}
}

// unitDir makes a rules file and a configuration for the unit's script.
func unitDir(t *testing.T, rules, config string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ipvsadm.rules"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+".default", []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestUnitRefusedLineLeavesTable: the unit's start, reload and load of a
// rules file with a line the kernel refuses (AUTO=true) leave the live
// table byte for byte as it was and fail, naming the file's line; the
// next save is refused until a load succeeds.
func TestUnitRefusedLineLeavesTable(t *testing.T) {
	labtest.Netns(t)
	restoreInput(t, liveTable)
	before := refSave(t)
	for _, f := range refusedFiles() {
		dir := unitDir(t, f.rules, "AUTO=true\n")
		for _, action := range []string{"start", "reload", "load"} {
			r := unit(t, dir, action)
			t.Logf("%s, %s: status %d\n%s", f.name, action, r.Code, r.Stdout)
			for _, want := range []string{f.message, fmt.Sprintf("1 line failed (input line %d)", f.line), "the IPVS table was not changed", "loading " + filepath.Join(dir, "ipvsadm.rules") + " failed"} {
				if !strings.Contains(r.Stdout, want) {
					t.Errorf("%s, %s: output lacks %q:\n%s", f.name, action, want, r.Stdout)
				}
			}
			if r.Code == 0 {
				t.Errorf("%s, %s: status 0", f.name, action)
			}
			if after := refSave(t); after != before {
				t.Errorf("%s, %s: the table changed:\n%s\nwant\n%s", f.name, action, after, before)
			}
		}
		if r := unit(t, dir, "save"); r.Code == 0 || !strings.Contains(r.Stdout, "last load failed") {
			t.Errorf("%s: save after a failed load: %+v", f.name, r)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "ipvsadm.rules")); string(b) != f.rules {
			t.Errorf("%s: the rules file changed", f.name)
		}
	}
}

// TestUnitStopDoesNotSave: with the packaged configuration and AUTO=true,
// stop clears the table and leaves the rules file alone; the save action
// writes the table there, and a start brings it back.
func TestUnitStopDoesNotSave(t *testing.T) {
	labtest.Netns(t)
	shipped, err := os.ReadFile("/src/packaging/default/ipvsadm")
	if err != nil {
		t.Fatal(err)
	}
	config := strings.Replace(string(shipped), "\nAUTO=\"false\"\n", "\nAUTO=\"true\"\n", 1)
	if config == string(shipped) {
		t.Fatal("the packaged configuration has no AUTO=\"false\" line")
	}
	old := "# ipvsadm.rules\n-A -t 10.0.0.1:80 -s rr\n"
	dir := unitDir(t, old, config)
	rules := filepath.Join(dir, "ipvsadm.rules")
	restoreInput(t, liveTable)
	if r := unit(t, dir, "stop"); r.Code != 0 {
		t.Fatalf("stop: %+v", r)
	}
	if b, _ := os.ReadFile(rules); string(b) != old {
		t.Errorf("stop wrote the rules file: %q", b)
	}
	if got := refSave(t); got != "" {
		t.Errorf("stop left the table %q, want it cleared", got)
	}
	restoreInput(t, liveTable)
	want := refSave(t)
	if r := unit(t, dir, "save"); r.Code != 0 || r.Stdout != "" {
		t.Fatalf("save: %+v", r)
	}
	if b, _ := os.ReadFile(rules); string(b) != "# ipvsadm.rules\n"+table(t) {
		t.Errorf("saved rules %q, want the table", b)
	}
	if r := unit(t, dir, "stop"); r.Code != 0 || refSave(t) != "" {
		t.Fatalf("stop: %+v", r)
	}
	if r := unit(t, dir, "start"); r.Code != 0 {
		t.Fatalf("start: %+v", r)
	}
	if got := refSave(t); got != want {
		t.Errorf("table after save, stop and start:\n%s\nwant\n%s", got, want)
	}
	if r := unit(t, dir, "status"); r.Code != 0 || !strings.Contains(r.Stdout, "TCP  10.7.0.1:80 wrr") {
		t.Errorf("status: %+v", r)
	}
	if r := unit(t, dir, "rate"); r.Code != 0 || !strings.Contains(r.Stdout, "CPS") {
		t.Errorf("rate: %+v", r)
	}
}
