//go:build lab

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ecmpHealthInterval is how often each connection sends a line while the
// checks run (on average): the lab's VM, with one CPU for every host,
// saturated at the other scenarios' 500 ms, made probes time out.
const ecmpHealthInterval = 2 * time.Second

// ecmpChecked is the ECMP service of every director as lvsctl run reads
// it: mh with mh-port over the four real servers, each checked over TCP
// through the VIP (the default for route real servers) with the default
// interval, timeout, rise and fall (2 s, 1 s, 2, 3): tighter timeouts time
// out on the lab's VM, saturated by the flows' packets.
func ecmpChecked() string {
	var b strings.Builder
	fmt.Fprintf(&b, `version: 2
services:
  - protocol: tcp
    address: %s
    port: %s
    scheduler: mh
    scheduler_flags: [mh-port]
    check: {type: tcp}
    destinations:
`, ecmpVIP, ecmpPort)
	for _, rs := range ecmpRSs {
		fmt.Fprintf(&b, "      - {address: %s, port: %s, method: route, weight: 1}\n", ecmpAddr[rs], ecmpPort)
	}
	fmt.Fprintf(&b, "  - protocol: udp\n    address: %s\n    port: %s\n    scheduler: mh\n    scheduler_flags: [mh-port]\n    destinations:\n", ecmpVIP, ecmpPort)
	for _, rs := range ecmpRSs {
		fmt.Fprintf(&b, "      - {address: %s, port: %s, method: route, weight: 1}\n", ecmpAddr[rs], ecmpPort)
	}
	return b.String()
}

// healthChecks runs lvsctl run on every director, each checking on its
// own, with 1,000 long-lived connections open: when rs4's service starts
// refusing, only rs4's connections break and every director takes rs4
// out; when it answers again, every director brings it back; restarting
// run on one director (SIGTERM) and killing and restarting it on another
// (SIGKILL) breaks none.
func (l *ecmpLab) healthChecks(t *testing.T, res *ecmpResults) {
	file := writeFile(t, "ecmp.yaml", ecmpChecked())
	svc, rs4 := ecmpVIPPort, ecmpAddr["rs4"]+":"+ecmpPort
	journals := map[string]string{}
	runs := map[string]*bgRun{}
	start := func(d string) {
		runs[d] = l.lvsctlRun(d, "--journal-dir", journals[d], "--drain-timeout", "0", file)
	}
	for _, d := range ecmpDirs {
		journals[d] = filepath.Join(t.TempDir(), "journal")
		start(d)
	}
	for _, d := range ecmpDirs {
		for _, rs := range ecmpRSs {
			l.waitWeight(d, svc, ecmpAddr[rs]+":"+ecmpPort, "1", 10*time.Second)
		}
	}
	f := l.flowsEvery(0, ecmpHealthInterval)
	deadline := time.Now().Add(30 * time.Second)
	for openNow(f.report()) < ecmpFlows && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}

	// rs4's service dies: its port answers with resets.
	reject := []string{"INPUT", "-p", "tcp", "--dport", ecmpPort, "-j", "REJECT", "--reject-with", "tcp-reset"}
	onRS4 := f.report().ByServer["rs4"]
	f.mark()
	l.must("rs4", "iptables", append([]string{"-I"}, reject...)...)
	var outAfter []string
	for _, d := range ecmpDirs {
		took := l.waitWeight(d, svc, rs4, "0", 2*time.Second*3+time.Second+5*time.Second)
		outAfter = append(outAfter, fmt.Sprintf("%s %.1f s", d, took.Seconds()))
	}
	r := f.settle(f.clock(), 3*time.Second, ecmpWatch)
	others := r.Broken + r.Pending - r.BrokenByServer["rs4"]
	t.Logf("rs4 refuses: out on %s; %d of %d connections broke (%s; by real server %s), %d silent; %d were on rs4",
		strings.Join(outAfter, ", "), r.Broken, r.AtMark, sortedCounts(r.Reasons), sortedCounts(r.BrokenByServer), r.Pending, onRS4)
	if others != 0 || r.AtMark == 0 || onRS4 == 0 {
		t.Errorf("rs4 failed: %d connections not on rs4 broke or went silent (of %d; %d on rs4), want 0", others, r.AtMark, onRS4)
	}
	res.figures = append(res.figures, ecmpFigure{"rs4's service dies; lvsctl run on each director takes it out",
		fmt.Sprintf("%d of %d connections not on rs4 broken; rs4 out on every director within %s", others, r.AtMark-onRS4, strings.Join(outAfter, ", ")),
		fmt.Sprintf("%d of %d on rs4 broken (its own)", r.BrokenByServer["rs4"], onRS4)})

	l.must("rs4", "iptables", append([]string{"-D"}, reject...)...)
	for _, d := range ecmpDirs {
		l.waitWeight(d, svc, rs4, "1", 2*time.Second*2+5*time.Second)
	}
	f.quit()

	// Restarts, with fresh connections over all four real servers.
	f = l.flowsEvery(0, ecmpHealthInterval)
	f.mark()
	runs["dir2"].stop(t)
	start("dir2")
	runs["dir3"].cmd.Process.Kill()
	<-runs["dir3"].done
	start("dir3")
	time.Sleep(6 * time.Second) // three intervals of checks after the restarts
	r = f.settle(f.clock(), 3*time.Second, ecmpWatch)
	t.Logf("lvsctl run restarted on dir2 (SIGTERM) and dir3 (SIGKILL): %d of %d broke (%s), %d silent", r.Broken, r.AtMark, sortedCounts(r.Reasons), r.Pending)
	if r.Broken+r.Pending != 0 || r.AtMark != ecmpFlows {
		l.logConnTables(t, r.BrokenPorts)
		t.Errorf("run restarts: %d of %d connections broke, %d silent; want 0 of %d", r.Broken, r.AtMark, r.Pending, ecmpFlows)
	}
	for _, d := range ecmpDirs {
		for _, rs := range ecmpRSs {
			l.waitWeight(d, svc, ecmpAddr[rs]+":"+ecmpPort, "1", 10*time.Second)
		}
	}
	res.figures = append(res.figures, ecmpFigure{"lvsctl run restarted on two directors (SIGTERM, SIGKILL)",
		fmt.Sprintf("%d of %d broken", r.Broken+r.Pending, r.AtMark), "—"})
	f.quit()
	for _, d := range ecmpDirs {
		runs[d].stop(t)
	}
}
