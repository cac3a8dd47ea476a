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
	n := seedNetwork(t, "drain")
	n.lvsprep("dir", "director", "nat", "--vip", seedVIP+"/24", "--dev", "eth0", "--rs-net", "172.16.0.0/24")
	n.lvsprep("rs1", "realserver", "nat", "--gateway", seedGateway)
	n.lvsprep("rs2", "realserver", "nat", "--gateway", seedGateway)
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
	if code != 4 || !strings.Contains(strings.Join(rest, "\n"), "interrupted: 1 real servers still draining") {
		t.Fatalf("after SIGINT: status %d, output:\n%s", code, strings.Join(rest, "\n"))
	}
	st := n.run("dir", labtest.Ours("lvsctl"), "status")
	if st.Code != 3 || !strings.Contains(st.Stdout, seedRS2) {
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
