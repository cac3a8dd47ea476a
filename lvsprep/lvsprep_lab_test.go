//go:build lab

package lvsprep

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lvskit/lvskit/lab/labtest"
)

// These tests run the lvsprep binary against the lab's real kernel, each in
// a fresh network namespace, for what the e2e tests do not reach: rollback
// of real changes, refusals, routes with attributes, and --dry-run's
// commands doing what lvsprep does.

var lvsprepBin = labtest.Ours("lvsprep")

// hostState is what the tests compare: addresses, routes, the nat table and
// the sysctls lvsprep touches, in the calling thread's namespace.
func hostState(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{{"-o", "-4", "address", "show"}, {"route", "show"}} {
		r := labtest.Run(t, "", "/usr/bin/ip", args...)
		for _, l := range strings.Split(r.Stdout, "\n") {
			l, _, _ = strings.Cut(l, "valid_lft")
			b.WriteString(l + "\n")
		}
	}
	b.WriteString(labtest.Run(t, "", "/usr/sbin/iptables", "-t", "nat", "-S").Stdout)
	for _, pat := range []string{"ipv4/ip_forward", "ipv4/conf/*/arp_ignore", "ipv4/conf/*/arp_announce"} {
		files, _ := filepath.Glob("/proc/sys/net/" + pat)
		for _, f := range files {
			v, _ := os.ReadFile(f)
			b.WriteString(f + "=" + string(v))
		}
	}
	return b.String()
}

func sh(t *testing.T, script string) {
	t.Helper()
	if r := labtest.Sh(t, script); r.Code != 0 {
		t.Fatalf("%s: exit %d: %s%s", script, r.Code, r.Stdout, r.Stderr)
	}
}

func TestLabFailureMidwayRollsBackRealChanges(t *testing.T) {
	labtest.Netns(t)
	sh(t, "ip link add eth0 type dummy && ip link set eth0 up")
	before := hostState(t)
	dir := t.TempDir()
	// Without iptables on PATH the last step (the masquerading rule) fails
	// after forwarding and the VIP were changed for real.
	cmd := []string{"env", "PATH=/nonexistent", lvsprepBin, "--state-dir", dir,
		"director", "nat", "--vip", "192.0.2.5/24", "--dev", "eth0", "--rs-net", "172.16.0.0/24"}
	r := labtest.Run(t, "", "/usr/bin/env", cmd[1:]...)
	if r.Code != 1 || !strings.Contains(r.Stderr, "iptables") || !strings.Contains(r.Stderr, "rolled back: nothing changed") {
		t.Errorf("exit %d, stderr %q; want 1 and an explanation", r.Code, r.Stderr)
	}
	for _, w := range []string{"changed   sysctl -w net.ipv4.ip_forward=1", "reverted  ip address del 192.0.2.5/24 dev eth0", "reverted  sysctl -w net.ipv4.ip_forward=0"} {
		if !strings.Contains(r.Stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, r.Stdout)
		}
	}
	if after := hostState(t); after != before {
		t.Errorf("rollback left a trace:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(ents) != 0 {
		t.Errorf("state left after rollback: %v", ents)
	}
}

func TestLabRefusalsChangeNothing(t *testing.T) {
	labtest.Netns(t)
	sh(t, "ip link add eth0 type dummy && ip link set eth0 up")
	before := hostState(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		uid    uint32
		args   []string
		code   int
		stderr string
	}{
		{"not root", 65534, []string{"realserver", "dr", "--vip", "10.0.0.100", "--dev", "eth0"}, 1, "you must be root to change the host"},
		{"unknown interface", 0, []string{"realserver", "dr", "--vip", "10.0.0.100", "--dev", "eth9"}, 1, `no network interface "eth9"`},
		{"bad address", 0, []string{"realserver", "dr", "--vip", "10.0.0.256", "--dev", "eth0"}, 2, "not an IP address"},
		{"snat not local", 0, []string{"director", "fullnat", "--vip", "10.0.0.100", "--dev", "eth0", "--snat", "10.9.9.9"}, 1, "not an address of this host"},
	} {
		cmd := labtestCommand(t, tc.uid, append([]string{"--state-dir", dir}, tc.args...))
		if cmd.Code != tc.code || !strings.Contains(cmd.Stderr, tc.stderr) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tc.name, cmd.Code, cmd.Stderr, tc.code, tc.stderr)
		}
	}
	if after := hostState(t); after != before {
		t.Errorf("a refused command changed the host:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestLabNotRootIsToldRootCan: on the real system, a user other than root
// is told "you must be root" where root alone can act or read: status and
// --undo --dry-run on a state directory of mode 0700, check's iptables
// rule and its line on whether lvsprep applied the profile.
func TestLabNotRootIsToldRootCan(t *testing.T) {
	labtest.Netns(t)
	sh(t, "ip link add eth0 type dummy && ip link set eth0 up")
	dir := filepath.Join(t.TempDir(), "state")
	for _, d := range []string{filepath.Dir(dir), filepath.Dir(filepath.Dir(dir))} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	nat := []string{"director", "nat", "--vip", "192.0.2.5/24", "--dev", "eth0", "--rs-net", "172.16.0.0/24"}
	if r := labtestCommand(t, 0, append([]string{"--state-dir", dir}, nat...)); r.Code != 0 {
		t.Fatalf("apply as root: %+v", r)
	}
	defer labtestCommand(t, 0, []string{"--state-dir", dir, "director", "nat", "--vip", "192.0.2.5", "--undo"})
	stateMsg := "lvsprep: you must be root to read the state in " + dir
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"status"}, stateMsg},
		{[]string{"director", "nat", "--vip", "192.0.2.5", "--undo", "--dry-run"}, stateMsg},
		{[]string{"director", "nat", "--vip", "192.0.2.5", "--undo"}, "lvsprep: you must be root to change the host"},
	} {
		r := labtestCommand(t, 65534, append([]string{"--state-dir", dir}, tc.args...))
		if r.Code != 1 || !strings.HasPrefix(r.Stderr, tc.stderr) {
			t.Errorf("lvsprep %s as nobody: exit %d, stderr %q; want 1, %q", strings.Join(tc.args, " "), r.Code, r.Stderr, tc.stderr)
		}
	}
	r := labtestCommand(t, 65534, append([]string{"--state-dir", dir, "check"}, nat...))
	for _, w := range []string{
		"| unknown | masquerading: 172.16.0.0/24 going elsewhere (nat POSTROUTING) | unknown: you must be root to read it |",
		"| ok      | forwarding: ip_forward=1 ",
		"Whether lvsprep applied it is unknown: you must be root to read the state in " + dir,
		"  # masquerading: 172.16.0.0/24 going elsewhere (nat POSTROUTING) (unknown): run the check as root to read it\n  lvsprep check director nat ",
	} {
		if r.Code != 1 || r.Stderr != "" || !strings.Contains(r.Stdout, w) {
			t.Errorf("check as nobody lacks %q (exit %d, stderr %q):\n%s", w, r.Code, r.Stderr, r.Stdout)
		}
	}
}

// labtestCommand runs lvsprep as uid.
func labtestCommand(t *testing.T, uid uint32, args []string) labtest.Result {
	t.Helper()
	cmd := exec.Command(lvsprepBin, args...)
	cmd.Args[0] = filepath.Base(lvsprepBin)
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	}
	return labtest.RunCmd(t, cmd)
}

func TestLabRealServerNATRestoresRoutesWithTheirAttributes(t *testing.T) {
	labtest.Netns(t)
	sh(t, `ip link add eth0 type dummy && ip link set eth0 up && ip address add 192.0.2.2/24 dev eth0
ip link add eth1 type dummy && ip link set eth1 up && ip address add 198.51.100.2/24 dev eth1
ip route add default via 192.0.2.1 dev eth0 metric 100 proto dhcp src 192.0.2.2
ip route add default via 198.51.100.1 dev eth1 metric 200 proto static`)
	before := hostState(t)
	dir := t.TempDir()
	out := labtest.Run(t, "", lvsprepBin, "--state-dir", dir, "realserver", "nat", "--gateway", "192.0.2.254", "--dev", "eth0")
	if out.Code != 0 {
		t.Fatalf("apply: %+v", out)
	}
	routes := labtest.Run(t, "", "/usr/bin/ip", "route", "show", "default").Stdout
	if strings.TrimSpace(routes) != "default via 192.0.2.254 dev eth0" {
		t.Errorf("default routes after apply:\n%s\nwant only the one via 192.0.2.254", routes)
	}
	if r := labtest.Run(t, "", lvsprepBin, "--state-dir", dir, "check", "realserver", "nat", "--gateway", "192.0.2.254", "--dev", "eth0"); r.Code != 0 {
		t.Errorf("check after apply: exit %d\n%s", r.Code, r.Stdout)
	}
	if r := labtest.Run(t, "", lvsprepBin, "--state-dir", dir, "realserver", "nat", "--gateway", "192.0.2.254", "--undo"); r.Code != 0 {
		t.Fatalf("undo: %+v", r)
	}
	if after := hostState(t); after != before {
		t.Errorf("undo did not restore the routes exactly:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestLabDryRunCommandsDoWhatLvsprepDoes applies two profiles in one
// namespace with lvsprep and in another by running the commands --dry-run
// printed, and compares the hosts.
func TestLabDryRunCommandsDoWhatLvsprepDoes(t *testing.T) {
	profiles := [][]string{
		{"director", "nat", "--vip", "192.0.2.5/24", "--dev", "eth0", "--rs-net", "172.16.0.0/24"},
		{"realserver", "dr", "--vip", "192.0.2.6", "--dev", "eth0"},
	}
	setup := "ip link add eth0 type dummy && ip link set eth0 up"
	var byTool, byCommands string
	t.Run("lvsprep", func(t *testing.T) {
		labtest.Netns(t)
		sh(t, setup)
		dir := t.TempDir()
		for _, args := range profiles {
			if r := labtest.Run(t, "", lvsprepBin, append([]string{"--state-dir", dir}, args...)...); r.Code != 0 {
				t.Fatalf("apply: %+v", r)
			}
		}
		byTool = hostState(t)
	})
	t.Run("dry-run", func(t *testing.T) {
		labtest.Netns(t)
		sh(t, setup)
		dir := t.TempDir()
		for _, args := range profiles {
			r := labtest.Run(t, "", lvsprepBin, append([]string{"--state-dir", dir, "--dry-run"}, args...)...)
			if r.Code != 0 {
				t.Fatalf("dry run: %+v", r)
			}
			sh(t, "set -e\n"+r.Stdout)
		}
		byCommands = hostState(t)
	})
	if byTool == "" || byTool != byCommands {
		t.Errorf("lvsprep and its --dry-run commands differ:\nlvsprep:\n%s\ncommands:\n%s", byTool, byCommands)
	}
}
