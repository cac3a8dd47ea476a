//go:build lab

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lvskit/lvskit/lab/labtest"
)

// TestLvsctlDrainPersistence: what docs/lvsctl.md says of persistence,
// through VS/NAT in the lab. A client's persistence template outlives the
// weight: with net.ipv4.vs.expire_quiescent_template=0 (the default) the
// client's new connections keep going to the draining server, and plan
// warns of it; with 1 they go to the others at once; an open connection
// still holds the drain, the template does not.
func TestLvsctlDrainPersistence(t *testing.T) {
	n := natNetwork(t, "persist")
	const eqt = "net/ipv4/vs/expire_quiescent_template"
	n.setSysctl("dir", eqt, "0")
	rules := func(servers ...string) string { return natRules("-t "+seedVIP80, "-s wrr -p 60", servers...) }
	if r := n.runIn("dir", rules(seedRS1, seedRS2), labtest.Ours("lvsctl"), "apply", "-"); r.Code != 0 {
		t.Fatalf("first apply: %+v", r)
	}
	first := n.get("client", seedVIP80, 4)
	var leaving, staying, leavingName, stayingName string
	switch {
	case first.ByServer["rs1"] == 4:
		leaving, staying, leavingName, stayingName = seedRS1, seedRS2, "rs1", "rs2"
	case first.ByServer["rs2"] == 4:
		leaving, staying, leavingName, stayingName = seedRS2, seedRS1, "rs2", "rs1"
	default:
		t.Fatalf("persistence should send the client's 4 connections to one server: %+v", first)
	}

	p := n.runIn("dir", rules(staying), labtest.Ours("lvsctl"), "plan", "-")
	if p.Code != 3 || !strings.Contains(p.Stdout, "expire_quiescent_template is not 1") {
		t.Errorf("plan with expire_quiescent_template=0 must warn of the templates: %+v", p)
	}
	k := n.keepAliveTo(leavingName) // holds the drain open
	bg := n.lvsctlStart("dir", rules(staying), "apply", "--drain-timeout", "2m", "-")
	bg.waitLine(t, "drain-start", time.Minute)

	quiescent0 := n.get("client", seedVIP80, 5)
	n.setSysctl("dir", eqt, "1")
	quiescent1 := n.get("client", seedVIP80, 5)
	if p := n.runIn("dir", rules(staying), labtest.Ours("lvsctl"), "plan", "-"); strings.Contains(p.Stdout, "expire_quiescent_template") {
		t.Errorf("plan with expire_quiescent_template=1 still warns: %+v", p)
	}
	k.close()
	line, _ := bg.waitLine(t, "drain-", time.Minute)
	code, rest := bg.wait(t, time.Minute)
	fmt.Printf("persistence, %s draining: 5 new connections of the template's client with expire_quiescent_template=0 went to %v, then with 1 to %v; %s\n",
		leavingName, quiescent0.ByServer, quiescent1.ByServer, line)
	if quiescent0.ByServer[leavingName] != 5 {
		t.Errorf("with expire_quiescent_template=0 the template should keep sending the client to %s: %+v", leavingName, quiescent0)
	}
	if quiescent1.ByServer[stayingName] != 5 {
		t.Errorf("with expire_quiescent_template=1 the client should go to %s: %+v", stayingName, quiescent1)
	}
	if !strings.Contains(line, "drain-done") || code != 0 {
		t.Errorf("the drain should end when the connection closes: %s; exit %d: %s", line, code, strings.Join(rest, "\n"))
	}
	if out := n.ipvsadm("dir", "-Sn"); strings.Contains(out, leaving) {
		t.Errorf("%s still in the table:\n%s", leavingName, out)
	}
}
