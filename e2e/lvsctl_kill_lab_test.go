//go:build lab

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lvskit/lvskit/lab/labtest"
)

// TestLvsctlKilledMidDrain: lvsctl killed in the middle of a drain, by a
// signal it cannot catch (SIGKILL, as a crash or the OOM killer would) or
// by SIGTERM, leaves the draining real server at weight 0 in the kernel and
// its old weight in the namespace's journal; status shows it (text and
// JSON); then either an apply of the old file (the server kept) puts the
// weight back, or an apply of the new file finishes the drain. Either way
// the journal is empty afterwards and no weight is left at 0.
func TestLvsctlKilledMidDrain(t *testing.T) {
	n := natNetwork(t, "kill")
	both, without := drainRules(seedRS1, seedRS2), drainRules(seedRS1)
	apply := func(rules string) labtest.Result {
		t.Helper()
		return n.runIn("dir", rules, labtest.Ours("lvsctl"), "apply", "--drain-timeout", "5m", "-")
	}
	if r := apply(both); r.Code != 0 {
		t.Fatalf("first apply: %+v", r)
	}

	for _, c := range []struct {
		sig   syscall.Signal
		then  string // the file the next apply brings
		after string // what the table holds for rs2 afterwards
	}{
		{syscall.SIGKILL, both, "-r " + seedRS2 + " -m -w 2\n"},
		{syscall.SIGKILL, without, ""},
		{syscall.SIGTERM, both, "-r " + seedRS2 + " -m -w 2\n"},
	} {
		name := fmt.Sprintf("%v, then apply of the file %s rs2", c.sig, map[bool]string{true: "keeping", false: "without"}[c.then == both])
		k := n.keepAliveTo("rs2") // holds the drain open
		bg := n.lvsctlStart("dir", without, "apply", "--drain-timeout", "5m", "-")
		bg.waitLine(t, "drain-start", time.Minute)
		bg.cmd.Process.Signal(c.sig)
		code, rest := bg.wait(t, time.Minute)
		fmt.Printf("%s: lvsctl exited %d after the signal, printing %q\n", name, code, rest)
		if c.sig == syscall.SIGKILL && code != -1 {
			t.Errorf("%s: exit status %d, want killed (-1)", name, code)
		}
		if c.sig == syscall.SIGTERM && code != 4 {
			t.Errorf("%s: exit status %d, want 4 (interrupted)", name, code)
		}
		if out := n.ipvsadm("dir", "-Sn"); !strings.Contains(out, "-r "+seedRS2+" -m -w 0\n") {
			t.Errorf("%s: rs2 should be left at weight 0:\n%s", name, out)
		}
		st := n.run("dir", labtest.Ours("lvsctl"), "status")
		if st.Code != 1 || !strings.Contains(st.Stdout, seedRS2) {
			t.Errorf("%s: status: %+v", name, st)
		}
		js := n.run("dir", labtest.Ours("lvsctl"), "status", "--json")
		var doc struct {
			Pending []struct {
				Destination string `json:"destination"`
				Weight      uint32 `json:"weight_before"`
			} `json:"pending_drains"`
		}
		if err := json.Unmarshal([]byte(js.Stdout), &doc); err != nil || js.Code != 1 || len(doc.Pending) != 1 ||
			doc.Pending[0].Destination != seedRS2 || doc.Pending[0].Weight != 2 {
			t.Errorf("%s: status --json must record rs2's weight before the drain (2): %v %+v", name, err, js)
		}
		k.close()
		r := apply(c.then)
		if r.Code != 0 || !strings.Contains(r.Stdout, "journal") {
			t.Errorf("%s: the next apply: %+v", name, r)
		}
		out := n.ipvsadm("dir", "-Sn")
		if strings.Contains(out, "-w 0\n") || (c.after != "") != strings.Contains(out, seedRS2) || !strings.Contains(out, c.after) {
			t.Errorf("%s: after the next apply rs2 should be %q; table:\n%s", name, c.after, out)
		}
		if st := n.run("dir", labtest.Ours("lvsctl"), "status"); st.Code != 0 {
			t.Errorf("%s: status after the next apply: %+v", name, st)
		}
		fmt.Printf("%s: the next apply printed:\n%s", name, r.Stdout)
		if c.then == without { // rs2 back for the next case
			if r := apply(both); r.Code != 0 {
				t.Fatalf("apply: %+v", r)
			}
		}
	}
}
