//go:build lab

package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSyncDaemonFailover: two VS/DR directors with the kernel's connection
// sync daemon (master on dir1, backup on dir2). A connection opened through
// the master shows up in the backup's table; after the VIP moves to the
// backup, the same TCP connection goes on working through it.
func TestSyncDaemonFailover(t *testing.T) {
	n := lanNetwork(t, "ha", "dir1", "dir2")
	for _, h := range []string{"rs1", "rs2"} {
		n.lvsprep(h, "realserver", "dr", "--vip", lanVIP, "--dev", "eth0")
	}
	n.lvsprep("dir1", "director", "dr", "--vip", lanVIP+"/24", "--dev", "eth0")
	for _, d := range []string{"dir1", "dir2"} {
		n.ipvsadm(d, "-A", "-t", lanVIP80, "-s", "rr")
		n.ipvsadm(d, "-a", "-t", lanVIP80, "-r", lanRS1, "-g")
		n.ipvsadm(d, "-a", "-t", lanVIP80, "-r", lanRS2, "-g")
	}
	n.ipvsadm("dir1", "--start-daemon", "master", "--mcast-interface", "eth0", "--syncid", "7")
	n.ipvsadm("dir2", "--start-daemon", "backup", "--mcast-interface", "eth0", "--syncid", "7")
	for d, want := range map[string]string{"dir1": "master sync daemon (mcast=eth0, syncid=7,", "dir2": "backup sync daemon (mcast=eth0, syncid=7,"} {
		if out := n.ipvsadm(d, "-L", "--daemon"); !strings.Contains(out, want) {
			t.Fatalf("%s: ipvsadm -L --daemon = %q, want %q", d, out, want)
		}
	}

	k := n.keepAlive("client", lanVIP80)
	first, err := k.get()
	if err != nil {
		t.Fatal(err)
	}
	rip := map[string]string{"rs1": lanRS1, "rs2": lanRS2}[first.Server]

	t.Run("synced", func(t *testing.T) {
		// The master sends a connection once it has seen 3 packets of it
		// (sync_threshold), in a message it flushes within a second or two.
		var line string
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			for _, l := range strings.Split(n.ipvsadm("dir2", "-Lnc"), "\n") {
				if strings.Contains(l, k.Local) {
					line = l
				}
			}
			if line != "" {
				break
			}
		}
		if line == "" {
			t.Fatalf("the backup never listed the connection from %s:\n%s", k.Local, n.ipvsadm("dir2", "-Lnc"))
		}
		if f := strings.Fields(line); len(f) != 6 || f[0] != "TCP" || f[4] != lanVIP80 || f[5] != rip {
			t.Errorf("backup's entry %q: want TCP %s -> %s -> %s", line, k.Local, lanVIP80, rip)
		}
		t.Logf("backup: %s", line)
	})

	t.Run("failover", func(t *testing.T) {
		n.lvsprep("dir1", "director", "dr", "--vip", lanVIP, "--undo")
		n.lvsprep("dir2", "director", "dr", "--vip", lanVIP+"/24", "--dev", "eth0")
		busybox, err := exec.LookPath("busybox")
		if err != nil {
			t.Fatal(err)
		}
		// Tell the segment that the VIP is now at dir2's address, as
		// keepalived would.
		n.must("dir2", busybox, "arping", "-U", "-c", "1", "-I", "eth0", "-s", lanVIP, lanVIP)
		inBefore := serviceStats(t, n.ipvsadm("dir2", "-Ln", "--stats"), lanVIP80)[1]
		a, err := k.get()
		if err != nil {
			t.Fatalf("the established connection broke after the failover: %v", err)
		}
		if a.Server != first.Server || a.ClientLocal != first.ClientLocal {
			t.Errorf("after the failover the connection reached %s from %s, want %s from %s", a.Server, a.ClientLocal, first.Server, first.ClientLocal)
		}
		// The kernel folds its per-CPU counters into these every two
		// seconds.
		time.Sleep(2500 * time.Millisecond)
		if inAfter := serviceStats(t, n.ipvsadm("dir2", "-Ln", "--stats"), lanVIP80)[1]; inAfter <= inBefore {
			t.Errorf("dir2 forwarded no packet (InPkts %d -> %d): the request did not go through the backup", inBefore, inAfter)
		}
	})

	n.ipvsadm("dir1", "--stop-daemon", "master")
	n.ipvsadm("dir2", "--stop-daemon", "backup")
	if out := n.ipvsadm("dir2", "-L", "--daemon"); strings.TrimSpace(out) != "" {
		t.Errorf("daemon still listed after --stop-daemon: %q", out)
	}
}
