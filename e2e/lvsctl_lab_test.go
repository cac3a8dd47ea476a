//go:build lab

package e2e

import (
	"bufio"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lvskit/lvskit/lab/labtest"
)

// bgLvsctl is lvsctl running in the background on a host, its output
// lines timestamped as they arrive.
type bgLvsctl struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan int
}

func (n *network) lvsctlStart(host, stdin string, args ...string) *bgLvsctl {
	n.t.Helper()
	cmd := exec.Command(labtest.Ours("lvsctl"), args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.StdoutPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	n.in(host, func() { err = cmd.Start() })
	if err != nil {
		n.t.Fatal(err)
	}
	b := &bgLvsctl{cmd: cmd, lines: make(chan string, 1000), done: make(chan int, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			b.lines <- sc.Text()
		}
		close(b.lines)
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if stderr.Len() > 0 {
			b.lines2(stderr.String())
		}
		b.done <- code
	}()
	n.t.Cleanup(func() { cmd.Process.Kill() })
	return b
}

func (b *bgLvsctl) lines2(s string) { fmt.Print("lvsctl stderr: " + s) }

// waitLine returns the first output line containing s (and every line read
// until then), failing after timeout.
func (b *bgLvsctl) waitLine(t *testing.T, s string, timeout time.Duration) (string, []string) {
	t.Helper()
	var seen []string
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-b.lines:
			if !ok {
				t.Fatalf("lvsctl ended before printing %q; it printed:\n%s", s, strings.Join(seen, "\n"))
			}
			seen = append(seen, l)
			if strings.Contains(l, s) {
				return l, seen
			}
		case <-deadline:
			t.Fatalf("lvsctl did not print %q within %v; it printed:\n%s", s, timeout, strings.Join(seen, "\n"))
		}
	}
}

// wait returns lvsctl's exit status and its remaining output.
func (b *bgLvsctl) wait(t *testing.T, timeout time.Duration) (int, []string) {
	t.Helper()
	var rest []string
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-b.lines:
			if ok {
				rest = append(rest, l)
				continue
			}
			select {
			case code := <-b.done:
				return code, rest
			case <-deadline:
				t.Fatal("lvsctl did not exit")
			}
		case <-deadline:
			t.Fatalf("lvsctl did not exit within %v; it printed:\n%s", timeout, strings.Join(rest, "\n"))
		}
	}
}

// drainRules is the VS/NAT service of the seed example with the given
// real servers (rs1 weight 1, rs2 weight 2).
func drainRules(servers ...string) string {
	s := "-A -t " + seedVIP80 + " -s wrr\n"
	for _, rs := range servers {
		w := map[string]string{seedRS1: "1", seedRS2: "2"}[rs]
		s += "-a -t " + seedVIP80 + " -r " + rs + " -m -w " + w + "\n"
	}
	return s
}

// keepAliveTo opens kept-alive connections from the client until one is
// served by server (wrr spreads new connections over both).
func (n *network) keepAliveTo(server string) *keepAlive {
	n.t.Helper()
	for range 6 {
		k := n.keepAlive("client", seedVIP80)
		a, err := k.get()
		if err != nil {
			n.t.Fatal(err)
		}
		if a.Server == server {
			return k
		}
		k.in.Close()
	}
	n.t.Fatalf("no connection reached %s in 6 tries", server)
	return nil
}

// closeKeepAlive ends the client process holding the connection, which
// closes it.
func (k *keepAlive) close() { k.in.Close() }

// TestLvsctlDrain: through VS/NAT with real connections, a real server
// that leaves with lvsctl apply keeps its open connection, gets no new
// one, and is deleted once that connection closes (the delay is printed);
// with a short --drain-timeout it is deleted at the deadline with the
// connection still open; after SIGINT in the middle of a drain, status
// shows it and the next apply finishes it, leaving no weight at 0.
func TestLvsctlDrain(t *testing.T) {
	n := natNetwork(t, "drain")
	if r := n.runIn("dir", drainRules(seedRS1, seedRS2), labtest.Ours("lvsctl"), "apply", "-"); r.Code != 0 {
		t.Fatalf("first apply: %+v", r)
	}

	// 1. rs1 leaves while a connection to it is open.
	k := n.keepAliveTo("rs1")
	bg := n.lvsctlStart("dir", drainRules(seedRS2), "apply", "--drain-timeout", "2m", "-")
	bg.waitLine(t, "drain-start", time.Minute)
	tally := n.get("client", seedVIP80, 20)
	if tally.ByServer["rs1"] != 0 || len(tally.Errors) > 0 {
		t.Errorf("new connections during the drain: %+v (rs1 must get none)", tally)
	}
	for range 3 {
		if a, err := k.get(); err != nil || a.Server != "rs1" {
			t.Errorf("the open connection to rs1 during its drain: %+v, %v", a, err)
		}
	}
	closed := time.Now()
	k.close()
	line, _ := bg.waitLine(t, "drain-done", time.Minute)
	deleted := time.Now()
	code, rest := bg.wait(t, time.Minute)
	if code != 0 {
		t.Fatalf("apply exited %d: %s", code, strings.Join(rest, "\n"))
	}
	fmt.Printf("drain: rs1 kept its connection (3 requests answered), got 0 of 20 new ones, and was deleted %.2fs after its last connection closed (%s)\n",
		deleted.Sub(closed).Seconds(), line)
	if out := n.ipvsadm("dir", "-Ln"); strings.Contains(out, seedRS1) {
		t.Errorf("rs1 still in the table:\n%s", out)
	}

	// 2. rs1 back; rs2 leaves with a 3 s deadline and an open connection.
	if r := n.runIn("dir", drainRules(seedRS1, seedRS2), labtest.Ours("lvsctl"), "apply", "-"); r.Code != 0 {
		t.Fatalf("apply: %+v", r)
	}
	k2 := n.keepAliveTo("rs2")
	r := n.runIn("dir", drainRules(seedRS1), labtest.Ours("lvsctl"), "apply", "--drain-timeout", "3s", "-")
	if r.Code != 0 || !strings.Contains(r.Stdout, "drain-timeout -t "+seedVIP80+" -r "+seedRS2+" deleted with active 1") {
		t.Fatalf("apply with --drain-timeout 3s: %+v", r)
	}
	fmt.Printf("drain with --drain-timeout 3s: rs2 deleted at the deadline with its connection open:\n%s", r.Stdout)
	k2.close()

	// 3. SIGINT in the middle of a drain, then apply again.
	if r := n.runIn("dir", drainRules(seedRS1, seedRS2), labtest.Ours("lvsctl"), "apply", "-"); r.Code != 0 {
		t.Fatalf("apply: %+v", r)
	}
	k3 := n.keepAliveTo("rs2")
	bg = n.lvsctlStart("dir", drainRules(seedRS1), "apply", "--drain-timeout", "5m", "-")
	bg.waitLine(t, "drain-start", time.Minute)
	bg.cmd.Process.Signal(syscall.SIGINT)
	code, rest = bg.wait(t, time.Minute)
	if code != 4 || !strings.Contains(strings.Join(rest, "\n"), "interrupted: 1 real server still draining") {
		t.Fatalf("after SIGINT: status %d, output:\n%s", code, strings.Join(rest, "\n"))
	}
	st := n.run("dir", labtest.Ours("lvsctl"), "status")
	if st.Code != 1 || !strings.Contains(st.Stdout, seedRS2) {
		t.Fatalf("status after SIGINT: %+v", st)
	}
	fmt.Printf("after SIGINT mid-drain, lvsctl status:\n%s", st.Stdout)
	if out := n.ipvsadm("dir", "-Sn"); !strings.Contains(out, "-r "+seedRS2+" -m -w 0\n") {
		t.Errorf("rs2 should wait at weight 0:\n%s", out)
	}
	k3.close()
	r = n.runIn("dir", drainRules(seedRS1), labtest.Ours("lvsctl"), "apply", "--drain-timeout", "5m", "-")
	if r.Code != 0 || !strings.Contains(r.Stdout, "journal: resuming") {
		t.Fatalf("apply after SIGINT: %+v", r)
	}
	out := n.ipvsadm("dir", "-Sn")
	if strings.Contains(out, seedRS2) || strings.Contains(out, "-w 0\n") {
		t.Errorf("after the second apply the table still holds rs2 or a weight 0:\n%s", out)
	}
	if st := n.run("dir", labtest.Ours("lvsctl"), "status"); st.Code != 0 {
		t.Errorf("status after the second apply: %+v", st)
	}
	fmt.Printf("the next apply finished the drain:\n%s", r.Stdout)
}

// trafficReport is what clients saw while a change was made.
type trafficReport struct {
	requests, failed, duringChange int
	firstErr                       string
	streamAnswers, streamErrors    int
	maxGap                         time.Duration
	connsBefore, connsAfter        uint64
	change                         time.Duration
}

// serviceConns reads the connection counter of a service (ipvsadm --stats --exact).
func (n *network) serviceConns(svc string) uint64 {
	n.t.Helper()
	out := n.ipvsadm("dir", "-Ln", "--stats", "--exact", "-t", svc)
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == "TCP" && f[1] == svc {
			var c uint64
			fmt.Sscan(f[2], &c)
			return c
		}
	}
	n.t.Fatalf("no counter line for %s in:\n%s", svc, out)
	return 0
}

// underTraffic runs change on the director while a client opens new
// connections back to back to the kept service and another streams
// requests on one kept-alive connection. The clients record what happened
// when; the report is made once they have stopped.
func (n *network) underTraffic(change func()) trafficReport {
	n.t.Helper()
	var rep trafficReport
	k := n.keepAliveTo("rs2")
	defer k.close()
	rep.connsBefore = n.serviceConns(seedVIP80)
	stop := make(chan struct{})
	type batch struct {
		start, end time.Time
		tally      tally
	}
	var batches []batch
	var answers []time.Time
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		untilClosed(stop, func() {
			if _, err := k.get(); err != nil {
				rep.streamErrors++
				return
			}
			answers = append(answers, time.Now())
		})
	}()
	getsDone := make(chan struct{})
	go func() {
		defer close(getsDone)
		untilClosed(stop, func() {
			start := time.Now()
			tally := n.get("client", seedVIP80, 3)
			batches = append(batches, batch{start, time.Now(), tally})
		})
	}()
	time.Sleep(2 * time.Second)
	changeStart := time.Now()
	change()
	changeEnd := time.Now()
	rep.change = changeEnd.Sub(changeStart)
	time.Sleep(2 * time.Second)
	close(stop)
	<-getsDone
	select {
	case <-streamDone:
	case <-time.After(30 * time.Second):
		n.t.Error("the streaming client did not finish its last request within 30 s")
	}
	for _, b := range batches {
		rep.requests += b.tally.Requests
		rep.failed += len(b.tally.Errors)
		if len(b.tally.Errors) > 0 && rep.firstErr == "" {
			rep.firstErr = b.tally.Errors[0]
		}
		if b.end.After(changeStart) && b.start.Before(changeEnd) {
			rep.duringChange += b.tally.Requests
		}
	}
	rep.streamAnswers = len(answers)
	for i := 1; i < len(answers); i++ {
		if gap := answers[i].Sub(answers[i-1]); gap > rep.maxGap {
			rep.maxGap = gap
		}
	}
	time.Sleep(2500 * time.Millisecond) // the kernel folds per-CPU counters every 2 s
	rep.connsAfter = n.serviceConns(seedVIP80)
	return rep
}

// zeroFailureRules is the director's table: filler services plus the kept
// service (VIP:80), one that leaves (VIP:83) and, in the changed file, a new
// one (VIP:82); the change also gives VIP:80 other weights. Not another
// scheduler: the kernel refuses new connections while it swaps a live
// service's scheduler, whoever asks (TestSchedulerEditRefusesConnections
// measures that window; lvsctl plan warns of it).
func zeroFailureRules(filler int, changed bool) string {
	var b strings.Builder
	for i := range filler {
		fmt.Fprintf(&b, "-A -t 10.200.%d.%d:80 -s rr\n-a -t 10.200.%d.%d:80 -r 172.16.0.2:80 -m -w 1\n", i/250, 1+i%250, i/250, 1+i%250)
	}
	if !changed {
		b.WriteString("-A -t " + seedVIP80 + " -s wrr\n-a -t " + seedVIP80 + " -r " + seedRS1 + " -m -w 1\n-a -t " + seedVIP80 + " -r " + seedRS2 + " -m -w 2\n")
		b.WriteString("-A -t " + seedVIP + ":83 -s rr\n-a -t " + seedVIP + ":83 -r " + seedRS1 + " -m -w 1\n")
	} else {
		b.WriteString("-A -t " + seedVIP80 + " -s wrr\n-a -t " + seedVIP80 + " -r " + seedRS1 + " -m -w 3\n-a -t " + seedVIP80 + " -r " + seedRS2 + " -m -w 1\n")
		b.WriteString("-A -t " + seedVIP + ":82 -s rr\n-a -t " + seedVIP + ":82 -r " + seedRS2 + " -m -w 1\n")
	}
	return b.String()
}

// TestLvsctlZeroFailure: on a director holding 2,000 other services, an
// lvsctl apply that changes the kept service's weights, adds
// a service and removes another: new connections to the kept service see
// 0 failures, a kept-alive connection streaming through VS/NAT gets every
// answer, and the service's counter keeps counting. The same change made as
// Debian's ipvsadm -C; ipvsadm -R is measured beside it and printed.
func TestLvsctlZeroFailure(t *testing.T) {
	const filler = 2000
	n := natNetwork(t, "zero")
	base, changed := zeroFailureRules(filler, false), zeroFailureRules(filler, true)
	load := func() {
		if r := n.runIn("dir", base, "/bin/sh", "-c", labtest.RefIpvsadm+" -C && "+labtest.RefIpvsadm+" -R"); r.Code != 0 {
			t.Fatalf("loading the base table: %+v", r)
		}
	}

	load()
	ours := n.underTraffic(func() {
		r := n.runIn("dir", changed, labtest.Ours("lvsctl"), "apply", "--drain-timeout", "10s", "-")
		if r.Code != 0 {
			t.Errorf("lvsctl apply: %+v", r)
		}
	})
	if p := n.runIn("dir", changed, labtest.Ours("lvsctl"), "plan", "-"); p.Code != 0 {
		t.Errorf("plan after the apply: %+v", p)
	}

	load()
	ref := n.underTraffic(func() {
		r := n.runIn("dir", changed, "/bin/sh", "-c", labtest.RefIpvsadm+" -C; "+labtest.RefIpvsadm+" -R")
		if r.Code != 0 {
			t.Errorf("ipvsadm -C; ipvsadm -R: %+v", r)
		}
	})

	fmt.Printf("change on a director with %d other services (kept service %s: wrr weights 1/2 -> 3/1, one service added, one removed)\n", filler, seedVIP80)
	fmt.Printf("%-34s %8s %8s %8s %10s %10s %9s %16s\n", "method", "change", "requests", "failed", "in window", "streamed", "stream err", "conns before/after")
	fmt.Println("(requests: new connections, in batches of 3; in window: those of batches overlapping the change; streamed: answers on one kept-alive connection)")
	for _, row := range []struct {
		name string
		r    trafficReport
	}{{"lvsctl apply", ours}, {"Debian ipvsadm -C; ipvsadm -R", ref}} {
		fmt.Printf("%-34s %7.2fs %8d %8d %10d %10d %9d %8d/%d  (longest gap between streamed answers %.2fs)\n", row.name, row.r.change.Seconds(),
			row.r.requests, row.r.failed, row.r.duringChange, row.r.streamAnswers, row.r.streamErrors, row.r.connsBefore, row.r.connsAfter, row.r.maxGap.Seconds())
		if row.r.firstErr != "" {
			fmt.Printf("  first failure: %s\n", row.r.firstErr)
		}
	}
	if ours.failed != 0 || ours.streamErrors != 0 {
		t.Errorf("lvsctl apply: %d of %d new connections failed, %d streamed requests failed", ours.failed, ours.requests, ours.streamErrors)
	}
	if ours.duringChange == 0 {
		t.Errorf("no request overlapped the apply: the test proves nothing")
	}
	if ours.connsAfter < ours.connsBefore+uint64(ours.requests) {
		t.Errorf("the kept service's counter went from %d to %d over %d new connections: it did not keep counting", ours.connsBefore, ours.connsAfter, ours.requests)
	}
}
