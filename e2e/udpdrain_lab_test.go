//go:build lab

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lvskit/lvskit/lab/labtest"
)

// TestLvsctlDrainUDP: what docs/lvsctl.md promises for UDP, through VS/NAT
// in the lab. A UDP flow has no end the director can see: its connection
// entry lives for the udp timeout after the flow's last datagram. So while
// a leaving real server's flow keeps sending, its datagrams keep reaching
// that server, new flows go to the others, and lvsctl waits; once the flow
// stops, lvsctl deletes the server after the entry expires (drain-done,
// not the drain timeout).
func TestLvsctlDrainUDP(t *testing.T) {
	const udpTimeout = 6 * time.Second
	n := natNetwork(t, "udpdrain")
	const rs1, rs2 = "172.16.0.2:5353", "172.16.0.3:5353"
	n.start("rs1", "udpecho", "rs1", rs1)
	n.start("rs2", "udpecho", "rs2", rs2)
	vip := seedVIP + ":5353"
	rules := func(servers ...string) string { return natRules("-u "+vip, "-s rr", servers...) }
	if r := n.runIn("dir", rules(rs1, rs2), labtest.Ours("lvsctl"), "apply", "-"); r.Code != 0 {
		t.Fatalf("first apply: %+v", r)
	}
	n.ipvsadm("dir", "--set", "0", "0", fmt.Sprint(int(udpTimeout.Seconds())))

	port := 40000
	flow := func() *udpFlow {
		t.Helper()
		port++
		var f *udpFlow
		var err error
		n.in("client", func() { f, err = dialUDPFlow(fmt.Sprintf("%s:%d", seedClient, port), vip, 2*time.Second) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	ping := func(f *udpFlow) string {
		t.Helper()
		a, err := f.Ping()
		if err != nil {
			t.Fatalf("ping: %v", err)
		}
		return a.Server
	}
	var kept *udpFlow
	for range 4 {
		if f := flow(); ping(f) == "rs2" {
			kept = f
			break
		}
	}
	if kept == nil {
		t.Fatal("no flow reached rs2 in 4 tries")
	}

	bg := n.lvsctlStart("dir", rules(rs1), "apply", "--drain-timeout", "2m", "-")
	bg.waitLine(t, "drain-start", time.Minute)
	keptAnswers, newToRS2, newFlows := map[string]int{}, 0, 0
	for range 10 {
		keptAnswers[ping(kept)]++
		if ping(flow()) == "rs2" {
			newToRS2++
		}
		newFlows++
		time.Sleep(500 * time.Millisecond)
	}
	lastDatagram := time.Now()
	if out := n.ipvsadm("dir", "-Sn"); !strings.Contains(out, "-r "+rs2+" -m -w 0\n") {
		t.Errorf("rs2 should be draining at weight 0 while its flow sends:\n%s", out)
	}
	line, seen := bg.waitLine(t, "drain-", time.Minute)
	deleted := time.Now()
	code, rest := bg.wait(t, time.Minute)
	fmt.Printf("UDP drain (udp timeout %v): the running flow's 10 datagrams during the drain were answered by %v; %d of %d new flows went to rs2; "+
		"rs2 deleted %.1fs after the flow's last datagram: %s\n", udpTimeout, keptAnswers, newToRS2, newFlows, deleted.Sub(lastDatagram).Seconds(), line)
	if keptAnswers["rs2"] != 10 {
		t.Errorf("the flow on rs2 should keep reaching rs2 while it sends: %v", keptAnswers)
	}
	if newToRS2 != 0 {
		t.Errorf("%d new flows reached the draining rs2", newToRS2)
	}
	if !strings.Contains(line, "drain-done") {
		t.Errorf("rs2 should leave once its flow's entry expired, not at the deadline: %s\n%s", line, strings.Join(seen, "\n"))
	}
	if d := deleted.Sub(lastDatagram); d < udpTimeout-time.Second {
		t.Errorf("rs2 deleted %v after its flow's last datagram, before the entry could expire (udp timeout %v)", d, udpTimeout)
	}
	if code != 0 {
		t.Errorf("apply exited %d: %s", code, strings.Join(rest, "\n"))
	}
	if out := n.ipvsadm("dir", "-Sn"); strings.Contains(out, rs2) {
		t.Errorf("rs2 still in the table:\n%s", out)
	}
}
