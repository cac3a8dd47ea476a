//go:build lab

package e2e

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The VS/DR and VS/TUN tests share one segment: client, director(s) and
// real servers all on 10.0.0.0/24, so the real servers can answer the client
// directly.
const (
	lanVIP    = "10.0.0.100"
	lanClient = "10.0.0.10"
	lanRS1    = "10.0.0.11:80"
	lanRS2    = "10.0.0.12:80"
)

var lanVIP80 = lanVIP + ":80"

// lanNetwork builds the segment with the given directors (dir1 at .1,
// dir2 at .2, ...) and two real servers running the echo server on port 80
// of every address (the VIP arrives on lo or tunl0).
func lanNetwork(t *testing.T, prefix string, directors ...string) *network {
	n := newNetwork(t, prefix, append([]string{"client", "rs1", "rs2"}, directors...)...)
	n.bridge("lan")
	n.plug("client", "eth0", "lan", lanClient+"/24")
	for i, d := range directors {
		n.plug(d, "eth0", "lan", "10.0.0."+strconv.Itoa(i+1)+"/24")
	}
	n.plug("rs1", "eth0", "lan", hostOf(lanRS1)+"/24")
	n.plug("rs2", "eth0", "lan", hostOf(lanRS2)+"/24")
	n.build()
	n.start("rs1", "http", "rs1", ":80")
	n.start("rs2", "http", "rs2", ":80")
	return n
}

// serviceStats returns the numbers of a service's line in ipvsadm -Ln
// --stats: Conns, InPkts, OutPkts, InBytes, OutBytes.
func serviceStats(t *testing.T, stats, service string) []int {
	t.Helper()
	for _, l := range strings.Split(stats, "\n") {
		f := strings.Fields(l)
		if len(f) == 7 && f[1] == service {
			var out []int
			for _, s := range f[2:] {
				v, err := strconv.Atoi(s)
				if err != nil {
					t.Fatalf("stats line %q: %v", l, err)
				}
				out = append(out, v)
			}
			return out
		}
	}
	t.Fatalf("no line for %s in:\n%s", service, stats)
	return nil
}

// setSysctl writes a sysctl on a host, as its administrator had it before
// lvsprep came.
func (n *network) setSysctl(host, path, value string) {
	n.t.Helper()
	n.in(host, func() {
		if err := os.WriteFile("/proc/sys/"+path, []byte(value), 0o644); err != nil {
			n.t.Fatal(err)
		}
	})
}

// testDirect runs the VS/DR or VS/TUN test: mode is "dr" or "tun", flag
// ipvsadm's forwarding flag (-g or -i).
func testDirect(t *testing.T, mode, flag string) {
	n := lanNetwork(t, mode, "dir")
	hosts := []string{"dir", "rs1", "rs2"}
	if mode == "tun" {
		// Strict reverse-path filtering (as some distributions set it)
		// would drop decapsulated packets: lvsprep must relax it and
		// --undo put it back.
		for _, h := range []string{"rs1", "rs2"} {
			n.setSysctl(h, "net/ipv4/conf/all/rp_filter", "1")
		}
		// Make lvsprep load ipip itself; the VM gets it back afterwards.
		// (busybox modprobe -r also tries the dependencies, some of which
		// stay in use, so its exit status says little: look in sysfs.)
		n.run("", "modprobe", "-r", "ipip")
		t.Cleanup(func() { exec.Command("modprobe", "ipip").Run() })
		if _, err := os.Stat("/sys/module/ipip"); err == nil {
			t.Log("ipip stays loaded: lvsprep finds it in place")
		}
	}
	before := map[string]string{}
	for _, h := range hosts {
		before[h] = n.snapshot(h)
	}
	n.lvsprep("dir", "director", mode, "--vip", lanVIP+"/24", "--dev", "eth0")
	for _, h := range []string{"rs1", "rs2"} {
		n.lvsprep(h, "realserver", mode, "--vip", lanVIP, "--dev", "eth0")
		n.lvsprep(h, "check", "realserver", mode, "--vip", lanVIP, "--dev", "eth0")
	}
	n.ipvsadm("dir", "-A", "-t", lanVIP80, "-s", "wrr")
	n.ipvsadm("dir", "-a", "-t", lanVIP80, "-r", lanRS1, flag, "-w", "1")
	n.ipvsadm("dir", "-a", "-t", lanVIP80, "-r", lanRS2, flag, "-w", "2")
	n.count("client", "filter", "INPUT", "-p", "tcp", "-s", lanVIP, "--sport", "80")
	n.count("client", "filter", "INPUT", "-p", "tcp")
	n.count("dir", "mangle", "PREROUTING", "-p", "tcp", "--sport", "80")

	t.Run("split", func(t *testing.T) {
		tally := n.get("client", lanVIP80, seedRequests)
		checkSplit(t, tally, lanVIP80, 1, 2, seedTolerance)
		if a := tally.First; a == nil || a.ServerLocal != lanVIP80 || hostOf(a.ServerRemote) != lanClient {
			t.Errorf("first answer %+v: the real server should see the client %s asking the VIP %s", a, lanClient, lanVIP80)
		}
		if c := n.counters("client", "filter", "INPUT"); c[0] == 0 || c[0] != c[1] {
			t.Errorf("client received %d TCP packets, %d of them from %s, want all", c[1], c[0], lanVIP80)
		}
	})

	t.Run("replies bypass the director", func(t *testing.T) {
		if d := n.counters("dir", "mangle", "PREROUTING"); d[0] != 0 {
			t.Errorf("the director received %d packets from port 80: %s replies must go from the real servers to the client directly", d[0], strings.ToUpper(mode))
		}
		// The kernel folds its per-CPU counters into these every two
		// seconds: wait for all the connections to show.
		var st []int
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Second) {
			st = serviceStats(t, n.ipvsadm("dir", "-Ln", "--stats"), lanVIP80)
			if st[0] >= seedRequests || time.Now().After(deadline) {
				break
			}
		}
		if st[0] < seedRequests || st[1] == 0 || st[2] != 0 {
			t.Errorf("service stats Conns=%d InPkts=%d OutPkts=%d: want ≥%d connections in, no packet out", st[0], st[1], st[2], seedRequests)
		}
	})

	schedulingChecks(t, n, lanVIP80, flag, [2]realServer{{"rs1", lanRS1, 1}, {"rs2", lanRS2, 2}})

	t.Run("undo", func(t *testing.T) {
		n.ipvsadm("dir", "-C")
		n.lvsprep("dir", "director", mode, "--vip", lanVIP, "--undo")
		// rs1 undoes first: in the TUN test it loaded ipip, which rs2
		// (another namespace, same kernel) still needs.
		n.lvsprep("rs1", "realserver", mode, "--vip", lanVIP, "--undo")
		if mode == "tun" {
			if out := n.must("rs2", ipCmd, "-o", "address", "show", "dev", "tunl0"); !strings.Contains(out, lanVIP+"/32") {
				t.Errorf("undo on rs1 took rs2's tunnel away: tunl0 on rs2 is now %q", out)
			}
		}
		n.lvsprep("rs2", "realserver", mode, "--vip", lanVIP, "--undo")
		for _, h := range hosts {
			if after := n.snapshot(h); after != before[h] {
				t.Errorf("%s after --undo differs from before lvsprep:\nbefore:\n%s\nafter:\n%s", h, before[h], after)
			}
		}
	})
}

func TestVSDR(t *testing.T)  { testDirect(t, "dr", "-g") }
func TestVSTUN(t *testing.T) { testDirect(t, "tun", "-i") }
