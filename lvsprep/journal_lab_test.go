//go:build lab

package lvsprep

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lvskit/lvskit/internal/netnsid"
	"github.com/lvskit/lvskit/lab/labtest"
)

// TestLabNetnsIdentity measures what Debian 12's kernel offers to tell
// network namespace instances apart: whether freed namespaces' inode
// numbers come back, and whether SO_NETNS_COOKIE does (it must not).
func TestLabNetnsIdentity(t *testing.T) {
	const n = 40
	var ids []netnsid.Identity
	for i := range n {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			labtest.Netns(t)
			id, err := netnsid.Current()
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		})
		// Namespaces are freed by a kernel worker after their last user
		// leaves; give it a moment so that numbers can come back.
		time.Sleep(20 * time.Millisecond)
	}
	inodes, cookies := map[uint64]int{}, map[uint64]int{}
	for _, id := range ids {
		inodes[id.Inode]++
		cookies[id.Cookie]++
		if id.Cookie == 0 || id.Boot == "" {
			t.Fatalf("identity %v: the kernel gives no netns cookie or boot id", id)
		}
	}
	t.Logf("%d namespaces one after another: %d distinct inodes, %d distinct cookies (cookies %d..%d)",
		len(ids), len(inodes), len(cookies), ids[0].Cookie, ids[len(ids)-1].Cookie)
	if len(cookies) != len(ids) {
		t.Errorf("a netns cookie came back: %v", cookies)
	}
}

// TestLabStaleNamespaceDirectory: the default netns-INODE directory of a
// namespace that is gone is set aside when a new namespace gets the inode.
func TestLabStaleNamespaceDirectory(t *testing.T) {
	labtest.Netns(t)
	sh(t, "ip link add eth0 type dummy && ip link set eth0 up")
	dir := filepath.Join(t.TempDir(), "netns-4026532999")
	r := labtest.Run(t, "", lvsprepBin, "--state-dir", dir, "realserver", "dr", "--vip", "10.0.0.100", "--dev", "eth0")
	if r.Code != 0 {
		t.Fatalf("apply: %+v", r)
	}
	t.Run("new namespace", func(t *testing.T) {
		labtest.Netns(t)
		sh(t, "ip link add eth0 type dummy && ip link set eth0 up")
		r := labtest.Run(t, "", lvsprepBin, "--state-dir", dir, "realserver", "dr", "--vip", "10.0.0.100", "--dev", "eth0")
		if r.Code != 0 || !strings.Contains(r.Stdout, "written by an earlier network namespace") || !strings.Contains(r.Stdout, "5 changed") {
			t.Errorf("apply in a new namespace over the old one's directory: %+v", r)
		}
	})
}

// TestLabPlantedStateCannotWriteCorePattern is the planted-state attack against
// the real binary as root: a state file planted under --state-dir or
// LVSPREP_STATE_DIR must not make --undo write kernel.core_pattern.
func TestLabPlantedStateCannotWriteCorePattern(t *testing.T) {
	labtest.Netns(t)
	sh(t, "ip link add eth0 type dummy && ip link set eth0 up")
	corePattern := func() string {
		b, err := os.ReadFile("/proc/sys/kernel/core_pattern")
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	want := corePattern()
	for _, tc := range []struct {
		name        string
		content     string
		uid         int
		mode        os.FileMode
		stderr, env string
	}{
		{"root-owned, a sysctl of no profile", plantedState, 0, 0o600, "not a step of realserver dr", ""},
		{"owned by nobody", plantedState, 65534, 0o600, "belongs to uid 65534, not root", ""},
		{"world-writable", plantedState, 0, 0o666, "writable by group or others", ""},
		{"through LVSPREP_STATE_DIR", plantedState, 65534, 0o644, "belongs to uid 65534", "env"},
	} {
		dir := t.TempDir()
		os.Chmod(dir, 0o700)
		file := statePath(dir, "realserver-dr-10.0.0.100")
		if err := os.WriteFile(file, []byte(tc.content), tc.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(file, tc.mode)
		os.Chown(file, tc.uid, tc.uid)
		var r labtest.Result
		if tc.env != "" {
			r = labtest.Sh(t, lvsprepBin+" realserver dr --vip 10.0.0.100 --undo", "LVSPREP_STATE_DIR="+dir)
		} else {
			r = labtest.Run(t, "", lvsprepBin, "--state-dir", dir, "realserver", "dr", "--vip", "10.0.0.100", "--undo")
		}
		if r.Code != 1 || !strings.Contains(r.Stderr, tc.stderr) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", tc.name, r.Code, r.Stderr, tc.stderr)
		}
		if got := corePattern(); got != want {
			t.Fatalf("%s: kernel.core_pattern is now %q (was %q)", tc.name, got, want)
		}
	}
}

// killProfiles are applied and undone under random SIGKILLs: sysctls,
// addresses, an iptables rule, and the default routes.
var killProfiles = [][]string{
	{"director", "nat", "--vip", "192.0.2.5/24", "--dev", "eth0", "--rs-net", "172.16.0.0/24"},
	{"realserver", "nat", "--gateway", "198.51.100.254", "--dev", "eth1"},
	{"realserver", "dr", "--vip", "192.0.2.6", "--dev", "eth0"},
}

// TestLabRandomKillsThenUndoRestoresTheHost kills lvsprep with SIGKILL at
// random moments while it applies or undoes a profile, then runs --undo of
// every profile and compares the host with its snapshot from before. The
// kill goes to lvsprep's process group, as a service manager's would, so an
// iptables child dies with it. LVSKIT_SOAK_LVSPREP_KILLS sets the number of
// kills (30 by default; make soak runs 1,000).
func TestLabRandomKillsThenUndoRestoresTheHost(t *testing.T) {
	labtest.Netns(t)
	sh(t, `ip link add eth0 type dummy && ip link set eth0 up && ip address add 192.0.2.2/24 dev eth0
ip link add eth1 type dummy && ip link set eth1 up && ip address add 198.51.100.2/24 dev eth1
ip route add default via 192.0.2.1 dev eth0 metric 100 proto dhcp src 192.0.2.2
ip route add default via 198.51.100.1 dev eth1`)
	kills := 30
	if v := os.Getenv("LVSKIT_SOAK_LVSPREP_KILLS"); v != "" {
		var err error
		if kills, err = strconv.Atoi(v); err != nil {
			t.Fatalf("LVSKIT_SOAK_LVSPREP_KILLS=%q", v)
		}
	}
	dir := t.TempDir()
	before := hostState(t)
	lvsprep := func(args ...string) labtest.Result {
		return labtest.Run(t, "", lvsprepBin, append([]string{"--state-dir", dir}, args...)...)
	}
	undoAll := func() {
		t.Helper()
		for _, p := range killProfiles {
			if r := lvsprep(undoArgs(p)...); r.Code != 0 {
				t.Fatalf("undo %v: %+v", p, r)
			}
		}
	}
	// How long a whole run takes here, so that kills spread over it.
	start := time.Now()
	for _, p := range killProfiles {
		if r := lvsprep(p...); r.Code != 0 {
			t.Fatalf("apply %v: %+v", p, r)
		}
	}
	undoAll()
	span := time.Since(start) / time.Duration(2*len(killProfiles))
	if after := hostState(t); after != before {
		t.Fatalf("apply and undo without kills did not restore the host:\n%s\nvs\n%s", before, after)
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 14))
	midway, finished := 0, 0
	// A loaded host makes runs slower than the estimate, or faster: each
	// kill that comes after the end shortens the window, and kills go on
	// (up to three times as many) until a quarter landed midway.
	for i := 0; i < kills || midway < kills/4 && i < 3*kills; i++ {
		p := killProfiles[rng.IntN(len(killProfiles))]
		args := p
		if rng.IntN(2) == 0 {
			if r := lvsprep(p...); r.Code != 0 {
				t.Fatalf("apply %v: %+v", p, r)
			}
			args = undoArgs(p)
		}
		cmd := exec.Command(lvsprepBin, append([]string{"--state-dir", dir}, args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(span) * 6 / 5)))
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			midway++
		} else {
			finished++
			span = max(span*9/10, time.Millisecond)
		}
		undoAll()
		if after := hostState(t); after != before {
			t.Fatalf("kill %d (%v): after --undo the host differs:\nbefore:\n%s\nafter:\n%s", i, args, before, after)
		}
		if ents, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(ents) != 0 {
			t.Fatalf("kill %d: state left after --undo: %v", i, ents)
		}
	}
	t.Logf("%d SIGKILLs (%d midway, %d after lvsprep had finished; the last kills within %v of the start): after --undo the host equaled its snapshot every time",
		midway+finished, midway, finished, span.Round(time.Millisecond))
	if midway < kills/4 {
		t.Errorf("only %d of %d kills landed while lvsprep ran", midway, kills)
	}
}
