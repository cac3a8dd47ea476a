//go:build lab

package lvsctl

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/lab/labtest"
)

// liveTable is the table each safety test starts from: two services, one
// with two real servers.
const liveTable = `-A -t 10.1.1.1:443 -s wrr
-a -t 10.1.1.1:443 -r 192.168.10.1:443 -m -w 1
-A -t 10.1.1.1:80 -s wlc
-a -t 10.1.1.1:80 -r 192.168.10.1:80 -m -w 3
-a -t 10.1.1.1:80 -r 192.168.10.2:80 -m -w 1
`

func liveDirector(t *testing.T) (before string) {
	t.Helper()
	labtest.Netns(t)
	t.Setenv("LVSCTL_JOURNAL_DIR", filepath.Join(t.TempDir(), "journal"))
	if r := labtest.Run(t, liveTable, labtest.RefIpvsadm, "-R"); r.Code != 0 {
		t.Fatalf("Debian's ipvsadm -R: %+v", r)
	}
	return labtest.Run(t, "", labtest.RefIpvsadm, "-Sn").Stdout
}

// TestLvsctlRefusesWhatTheKernelWouldRefuse: names the kernel does not
// know (on an add and on an edit; a scheduler of a later kernel whose
// module this one lacks; a persistence engine), a lower threshold above
// the upper one and an empty file: plan and apply exit 2 naming the
// line, and the live table is byte for byte what it was.
func TestLvsctlRefusesWhatTheKernelWouldRefuse(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"new service lcx", "-A -t 10.1.1.1:8080 -s lcx\n-a -t 10.1.1.1:8080 -r 192.168.10.3:8080 -m\n" +
			"-A -t 10.1.1.1:80 -s wlc\n-a -t 10.1.1.1:80 -r 192.168.10.1:80 -m -w 3\n-a -t 10.1.1.1:80 -r 192.168.10.2:80 -m -w 1\n",
			`<stdin>:1: scheduler "lcx": this kernel has no module ip_vs_lcx (Scheduler or persistence engine not found)`},
		{"edit to wrrr", strings.Replace(liveTable, "-s wlc", "-s wrrr", 1) + "-a -t 10.1.1.1:80 -r 192.168.10.4:80 -m\n",
			`<stdin>:3: scheduler "wrrr": this kernel has no module ip_vs_wrrr`},
		{"twos, not in Linux 6.1", strings.Replace(liveTable, "-s wrr", "-s twos", 1),
			`<stdin>:1: scheduler "twos": this kernel has no module ip_vs_twos`},
		{"unknown persistence engine", liveTable + "-A -u 10.1.1.1:5060 -s rr -p 60 --pe nosuch\n",
			`<stdin>:6: persistence engine "nosuch"`},
		{"thresholds", strings.Replace(liveTable, "-m -w 3", "-m -w 3 -x 5 -y 7", 1),
			`<stdin>:4: real server 192.168.10.1:80: lower threshold 7 is above the upper threshold 5`},
		{"empty file", "# ipvsadm.rules\n", "<stdin> holds no service"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := liveDirector(t)
			for _, args := range [][]string{{"plan", "-"}, {"apply", "-"}, {"apply", "--drain-timeout", "0", "--max-delete", "100", "-"}} {
				r := labtest.Run(t, tc.file, lvsctlBin(), args...)
				if r.Code != exitUsage || !strings.Contains(r.Stderr, tc.want) || r.Stdout != "" {
					t.Errorf("lvsctl %s: %+v; want status 2 and %q", strings.Join(args, " "), r, tc.want)
				}
			}
			if after := labtest.Run(t, "", labtest.RefIpvsadm, "-Sn").Stdout; after != before {
				t.Errorf("the table changed:\n%s\nto\n%s", before, after)
			}
		})
	}
}

// TestLvsctlKernelRefusalMidPlanRemovesNothing: the kernel refuses a
// destination only it can judge (the broadcast address of a subnet on a
// local link) after another service was added: apply exits 1, reports the
// refused, made and held-back changes, drains and deletes nothing, and
// never blames a concurrent change; the table keeps everything it had.
func TestLvsctlKernelRefusalMidPlanRemovesNothing(t *testing.T) {
	for _, timeout := range []string{"0", "5m"} {
		t.Run("drain-timeout "+timeout, func(t *testing.T) {
			before := liveDirector(t)
			if r := labtest.Sh(t, "ip link add dummy0 type dummy && ip link set dummy0 up && ip addr add 10.9.0.1/24 dev dummy0"); r.Code != 0 {
				t.Fatalf("dummy0: %+v", r)
			}
			// Adds 10.1.1.1:22 and 10.1.1.1:8080 (whose server the kernel
			// refuses), drops 10.1.1.1:443 and one server of :80.
			file := "-A -t 10.1.1.1:22 -s rr\n-a -t 10.1.1.1:22 -r 192.168.10.5:22 -m\n" +
				"-A -t 10.1.1.1:80 -s wlc\n-a -t 10.1.1.1:80 -r 192.168.10.1:80 -m -w 3\n" +
				"-A -t 10.1.1.1:8080 -s rr\n-a -t 10.1.1.1:8080 -r 10.9.0.255:8080 -m\n"
			if p := labtest.Run(t, file, lvsctlBin(), "plan", "--max-delete", "100", "-"); p.Code != exitChanges {
				t.Fatalf("plan: %+v", p)
			}
			r := labtest.Run(t, file, lvsctlBin(), "apply", "--max-delete", "100", "--drain-timeout", timeout, "-")
			if r.Code != exitFailed {
				t.Fatalf("apply: status %d, want 1: %+v", r.Code, r)
			}
			for _, want := range []string{
				"add-dest -t 10.1.1.1:8080 -r 10.9.0.255:8080: FAILED: ipvs NEW_DEST: invalid argument",
				"stopped: the kernel refused 1 change; 3 other changes were made",
				"nothing was drained or deleted: 2 removals held back:",
				"  held: delete-dest -t 10.1.1.1:80 -r 192.168.10.2:80",
				"  held: delete-service -t 10.1.1.1:443",
			} {
				if !strings.Contains(r.Stdout, want+"\n") {
					t.Errorf("apply output lacks %q:\n%s", want, r.Stdout)
				}
			}
			if strings.Contains(r.Stdout, "planned again") || strings.Contains(r.Stdout, "drain-start") {
				t.Errorf("apply blamed a race or started a drain:\n%s", r.Stdout)
			}
			after := labtest.Run(t, "", labtest.RefIpvsadm, "-Sn").Stdout
			for _, line := range strings.Split(strings.TrimSpace(before), "\n") {
				if !strings.Contains(after, line+"\n") {
					t.Errorf("the table lost %q:\n%s", line, after)
				}
			}
			if !strings.Contains(after, "-A -t 10.1.1.1:22 -s rr\n") {
				t.Errorf("the add made before the refusal is missing:\n%s", after)
			}
		})
	}
}
