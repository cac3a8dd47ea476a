//go:build lab

package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/lab/labtest"
)

// TestTryRunScript: the walk-through docs/health.md gives a new user
// (make try-run) does what it says: rs2 out while it fails, back after,
// status exiting 1 then 0, the table left as it was.
func TestTryRunScript(t *testing.T) {
	labtest.Require(t)
	script := filepath.Join(labtest.SrcDir, "lab", "try", "run.sh")
	bin := filepath.Dir(labtest.Ours("lvsctl"))
	// The lab-run PATH: ours first, then the system's programs.
	// The director in a namespace of its own (busybox's unshare would run
	// busybox's shell and its ip applet).
	r := labtest.Sh(t, "ip netns add try-dir && ip netns exec try-dir sh "+script, "PATH="+bin+":/usr/sbin:/usr/bin:/sbin:/bin")
	if r.Code != 0 {
		t.Fatalf("%s: %+v", script, r)
	}
	out := r.Stdout
	failing, back, ok := strings.Cut(out, "== rs2 answers again")
	if !ok {
		t.Fatalf("the walk-through lacks its steps:\n%s", out)
	}
	_, failing, _ = strings.Cut(failing, "== rs2 stops answering")
	for _, want := range []string{"172.16.0.3:80                Masq    0", "6 rs1", "lvsctl status exited 1"} {
		if !strings.Contains(failing, want) {
			t.Errorf("while rs2 fails, no %q:\n%s", want, failing)
		}
	}
	// Exit 1 without a server held out means probes ran late: a VM
	// short of CPU, which status must say.
	status := "lvsctl status exited 0"
	if strings.Contains(back, "probes LATE") {
		status = "lvsctl status exited 1"
	}
	for _, want := range []string{"172.16.0.3:80                Masq    2", "rs2\n", status,
		"-a -t 192.0.2.100:80 -r 172.16.0.3:80 -m -w 2"} {
		if !strings.Contains(back, want) {
			t.Errorf("after rs2 came back, no %q:\n%s", want, back)
		}
	}
}
