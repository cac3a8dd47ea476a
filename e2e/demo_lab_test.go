//go:build lab

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lvskit/lvskit/lab/labtest"
	"golang.org/x/sys/unix"
)

// makeDemoLines are the lines make demo prints around TestDemo's own:
// make's four commands, labrun's "=== lab:" header, the test binary's
// "=== RUN", "--- PASS" and "PASS", and labrun's four-line summary.
const makeDemoLines = 12

// TestDemo is what make demo shows a newcomer: the VS/NAT example from the
// LVS paper (VIP 202.103.106.5; port 80 to 172.16.0.2:80 with weight 1 and
// 172.16.0.3:8000 with weight 2; port 21 to 172.16.0.3:21), built with our
// lvsprep and ipvsadm on a real kernel, with real requests. It prints as it
// goes and asserts the split, so it is a test as well; and it asserts that
// make demo tells the story in under 150 lines, counting everything this
// process and its children print while it runs.
func TestDemo(t *testing.T) {
	n := seedNetwork(t, "demo")
	lines := countOutput(t)
	out := os.Stdout
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	indent := func(s string) {
		for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
			p("    %s", l)
		}
	}
	// show runs one of our tools on a host and prints the command and its
	// output, as a terminal session would.
	show := func(host, tool string, args ...string) string {
		var o string
		if tool == "lvsprep" {
			o = n.lvsprep(host, args...)
		} else {
			o = n.ipvsadm(host, args...)
		}
		p("  %s# %s %s", host, tool, strings.Join(args, " "))
		if o != "" {
			indent(o)
		}
		return o
	}

	p("")
	p("== lvskit demo: the VS/NAT example of the LVS paper, on a real kernel ==")
	p("")
	p("Four hosts (network namespaces in the lab VM), two networks:")
	p("  client   %-22s the Internet side", seedClient)
	p("  dir      %-22s the director: VIP on eth0, %s on eth1", seedVIP+" (VIP)", seedGateway)
	p("  rs1      %-22s real server: HTTP on :80", hostOf(seedRS1))
	p("  rs2      %-22s real server: HTTP on :8000, FTP on :21", hostOf(seedRS2))
	p("Each HTTP server answers with its name and the addresses it sees.")
	p("")
	p("1. Prepare the hosts (lvsprep; --dry-run would print these as ip/sysctl/iptables commands):")
	show("dir", "lvsprep", "director", "nat", "--vip", seedVIP+"/24", "--dev", "eth0", "--rs-net", "172.16.0.0/24", "--ftp")
	show("rs1", "lvsprep", "realserver", "nat", "--gateway", seedGateway)
	show("rs2", "lvsprep", "realserver", "nat", "--gateway", seedGateway)
	p("")
	p("2. The virtual services (our ipvsadm):")
	show("dir", "ipvsadm", "-A", "-t", seedVIP80, "-s", "wrr")
	show("dir", "ipvsadm", "-a", "-t", seedVIP80, "-r", seedRS1, "-m", "-w", "1")
	show("dir", "ipvsadm", "-a", "-t", seedVIP80, "-r", seedRS2, "-m", "-w", "2")
	show("dir", "ipvsadm", "-A", "-t", seedVIP+":21")
	show("dir", "ipvsadm", "-a", "-t", seedVIP+":21", "-r", seedRS2FTP, "-m")
	show("dir", "ipvsadm", "-Ln")
	p("")

	p("3. %d requests from the client to http://%s/, each on a new connection:", seedRequests, seedVIP)
	start := time.Now()
	tally := n.get("client", seedVIP80, seedRequests)
	p("  %-6s %-16s %6s %9s %5s", "SERVER", "ADDRESS", "WEIGHT", "EXPECTED", "GOT")
	for _, s := range []struct {
		name, addr string
		weight     int
	}{{"rs1", seedRS1, 1}, {"rs2", seedRS2, 2}} {
		p("  %-6s %-16s %6d %9d %5d", s.name, s.addr, s.weight, seedRequests*s.weight/3, tally.ByServer[s.name])
	}
	p("  (%d answered, %d failed, in %.1fs; every answer came from %v)", seedRequests-len(tally.Errors), len(tally.Errors), time.Since(start).Seconds(), keys(tally.Remotes))
	splitErrors(t, tally, seedVIP80, 1, 2, seedTolerance)
	p("")

	p("4. One request, before and after the director rewrote it:")
	k := n.keepAlive("client", seedVIP80)
	a, err := k.get()
	if err != nil {
		t.Fatal(err)
	}
	var entry string
	for _, l := range strings.Split(n.ipvsadm("dir", "-Lnc"), "\n") {
		if strings.Contains(l, a.ClientLocal) {
			entry = strings.Join(strings.Fields(l), " ")
		}
	}
	p("  the client sent   %s -> %s", a.ClientLocal, a.ClientRemote)
	p("  %s received      %s -> %s", a.Server, a.ServerRemote, a.ServerLocal)
	p("  and its reply went back through the director, rewritten to come from %s.", a.ClientRemote)
	p("  The director's connection entry (ipvsadm -Lnc: proto expire state source virtual destination):")
	p("    %s", entry)
	if hostOf(a.ServerRemote) != seedClient || hostOf(a.ClientRemote) != seedVIP || !strings.Contains(entry, a.ServerLocal) {
		t.Errorf("addresses do not show the NAT: %+v, entry %q", a, entry)
	}
	k.close() // or the drain of step 7 would wait for it
	p("")

	p("5. Port 21: a passive-mode FTP download through VS/NAT (the kernel's ip_vs_ftp helper):")
	var ftp ftpResult
	n.role("client", "ftpget", &ftp, seedVIP+":21")
	okSum := ftp.SHA256 == sha256Hex(fileContent(ftpSize))
	p("  rs2 offered its own address; the client got: %s", ftp.PASVReply)
	p("  %d bytes from %s, checksum %s", ftp.Size, ftp.DataAddr, map[bool]string{true: "intact", false: "WRONG"}[okSum])
	if !okSum || ftp.Size != ftpSize {
		t.Errorf("FTP transfer corrupted: %+v", ftp)
	}
	p("")

	// The kernel folds its per-CPU counters into the totals every two
	// seconds.
	time.Sleep(2500 * time.Millisecond)
	p("6. The director's counters:")
	show("dir", "ipvsadm", "-Ln", "--stats")
	p("")

	p("7. Change the live director with lvsctl, while the client keeps sending requests:")
	demoLvsctl(t, n, p, indent)
	p("")

	p("8. Health checks: lvsctl run keeps the table as a file says, taking failed real servers out:")
	demoHealth(t, n, p)
	p("")

	p("9. Take it all down again: ipvsadm -C, and lvsprep --undo restores each host exactly:")
	show("dir", "ipvsadm", "-C")
	show("dir", "lvsprep", "director", "nat", "--vip", seedVIP, "--undo")
	show("rs1", "lvsprep", "realserver", "nat", "--gateway", seedGateway, "--undo")
	show("rs2", "lvsprep", "realserver", "nat", "--gateway", seedGateway, "--undo")
	p("")
	p("More: docs/lvsprep.md, the tests in %s, and make lab for the whole suite.", filepath.Base(mustGetwd(t)))
	if got := lines() + makeDemoLines; got >= 150 {
		t.Errorf("make demo prints %d lines (%d of them this test's), want fewer than 150", got, got-makeDemoLines)
	}
}

// countOutput passes on everything written to this process's standard
// output and error (the test's prints, t.Log, children that inherited
// them) from now on, to the standard output, and counts its lines. The
// returned function, also run when the test ends or 10 s before its
// deadline, stops that and returns the count.
func countOutput(t *testing.T) func() int {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := [2]int{-1, -1}
	for i, fd := range []int{1, 2} {
		if saved[i], err = unix.Dup(fd); err == nil {
			err = unix.Dup3(int(w.Fd()), fd, 0)
		}
		if err != nil {
			t.Fatalf("redirecting fd %d: %v", fd, err)
		}
	}
	orig := os.NewFile(uintptr(saved[0]), "stdout")
	var count int
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 32<<10)
		for {
			k, err := r.Read(buf)
			count += bytes.Count(buf[:k], []byte("\n"))
			orig.Write(buf[:k])
			if err != nil {
				return
			}
		}
	}()
	var once sync.Once
	stop := func() int {
		once.Do(func() {
			for i, fd := range []int{1, 2} {
				unix.Dup3(saved[i], fd, 0)
			}
			unix.Close(saved[1])
			w.Close()
			// A child still holding the pipe would keep it open.
			r.SetReadDeadline(time.Now().Add(5 * time.Second))
			<-copied
			r.Close()
			orig.Close()
		})
		return count
	}
	t.Cleanup(func() { stop() })
	// A test that panics runs its cleanups before the panic is printed;
	// the binary's timeout does not, so the output is given back before.
	if deadline, ok := t.Deadline(); ok {
		timer := time.AfterFunc(time.Until(deadline)-10*time.Second, func() { stop() })
		t.Cleanup(func() { timer.Stop() })
	}
	return stop
}

func keys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// demoLvsctl is the demo's lvsctl step: plan and apply new weights, then
// take rs2 out of port 80 with a drain, while a client keeps opening
// connections; it asserts that none failed.
func demoLvsctl(t *testing.T, n *network, p func(string, ...any), indent func(string)) {
	rules := func(w1, w2 string) string {
		s := "-A -t " + seedVIP80 + " -s wrr\n-a -t " + seedVIP80 + " -r " + seedRS1 + " -m -w " + w1 + "\n"
		if w2 != "" {
			s += "-a -t " + seedVIP80 + " -r " + seedRS2 + " -m -w " + w2 + "\n"
		}
		return s + "-A -t " + seedVIP + ":21 -s wlc\n-a -t " + seedVIP + ":21 -r " + seedRS2FTP + " -m -w 1\n"
	}
	lvsctl := func(stdin string, args ...string) string {
		r := n.runIn("dir", stdin, labtest.Ours("lvsctl"), args...)
		p("  dir# lvsctl %s < rules", strings.Join(args, " "))
		indent(r.Stdout + r.Stderr)
		if want := map[string]int{"plan": 3}[args[0]]; r.Code != want {
			t.Errorf("lvsctl %v: exit %d, want %d", args, r.Code, want)
		}
		return r.Stdout
	}
	stop := make(chan struct{})
	done := make(chan tally)
	go func() {
		total := tally{ByServer: map[string]int{}}
		for {
			select {
			case <-stop:
				done <- total
				return
			default:
			}
			tl := n.get("client", seedVIP80, 5)
			total.Requests += tl.Requests
			total.Errors = append(total.Errors, tl.Errors...)
			for k, v := range tl.ByServer {
				total.ByServer[k] += v
			}
		}
	}()
	p("  The rules file now gives rs1 weight 3 and rs2 weight 1; plan shows the edits (exit 3: changes):")
	lvsctl(rules("3", "1"), "plan", "-")
	lvsctl(rules("3", "1"), "apply", "-")
	p("  dir# lvsctl top -b -n 2 -d 1 --filter :80     (the live view's batch mode: two frames, a second apart)")
	top := n.run("dir", labtest.Ours("lvsctl"), "top", "-b", "-n", "2", "-d", "1", "--filter", ":80")
	indent(top.Stdout + top.Stderr)
	if frames := strings.Count(top.Stdout, "lvsctl top - "); top.Code != 0 || frames != 2 || !strings.Contains(top.Stdout, "-t "+seedVIP80) {
		t.Errorf("lvsctl top -b -n 2: exit %d, %d frames:\n%s", top.Code, frames, top.Stdout)
	}
	p("  Then rs2 leaves port 80: apply drains it (weight 0, deleted once its connections end):")
	lvsctl(rules("3", ""), "apply", "--drain-timeout", "30s", "-")
	close(stop)
	tally := <-done
	p("  Meanwhile the client made %d requests, each on a new connection: %d failed (rs1 %d, rs2 %d).",
		tally.Requests, len(tally.Errors), tally.ByServer["rs1"], tally.ByServer["rs2"])
	if len(tally.Errors) > 0 || tally.Requests == 0 {
		t.Errorf("requests during the lvsctl changes: %d made, errors %v", tally.Requests, tally.Errors)
	}
	show := n.ipvsadm("dir", "-Sn")
	p("  dir# ipvsadm -Sn")
	indent(show)
	if strings.Contains(show, "-a -t "+seedVIP80+" -r "+seedRS2) {
		t.Errorf("rs2 still serves port 80:\n%s", show)
	}
}

// demoHealth is the demo's health step: lvsctl run with checks, rs2's
// port refusing connections, then coming back, while a client keeps
// sending requests; no request fails once the failure is detected.
func demoHealth(t *testing.T, n *network, p func(string, ...any)) {
	p("  dir# lvsctl run director.yaml      (an http check of each real server every 500 ms; fall 2, rise 2)")
	run := n.lvsctlRun("dir", writeFile(t, "director.yaml", httpChecked))
	n.waitWeight("dir", seedVIP80, seedRS2, "2", 10*time.Second)
	var mu sync.Mutex
	phase := 0
	tallies := make([]tally, 3)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			tl := n.get("client", seedVIP80, 1)
			mu.Lock()
			tallies[phase].Requests += tl.Requests
			tallies[phase].Errors = append(tallies[phase].Errors, tl.Errors...)
			mu.Unlock()
		}
	}()
	setPhase := func(i int) { mu.Lock(); phase = i; mu.Unlock() }
	p("  rs2# iptables -I INPUT -p tcp --dport 8000 -j REJECT --reject-with tcp-reset")
	n.must("rs2", "iptables", "-I", "INPUT", "-p", "tcp", "--dport", "8000", "-j", "REJECT", "--reject-with", "tcp-reset")
	setPhase(1)
	took := n.waitWeight("dir", seedVIP80, seedRS2, "0", 5*time.Second)
	setPhase(2)
	p("  after %.1f s: %s", took.Seconds(), lastLine(run.text(), "-> down"))
	time.Sleep(time.Second)
	p("  rs2# iptables -D INPUT -p tcp --dport 8000 -j REJECT --reject-with tcp-reset")
	n.must("rs2", "iptables", "-D", "INPUT", "-p", "tcp", "--dport", "8000", "-j", "REJECT", "--reject-with", "tcp-reset")
	back := n.waitWeight("dir", seedVIP80, seedRS2, "2", 5*time.Second)
	close(stop)
	<-done
	p("  after %.1f s: %s", back.Seconds(), lastLine(run.text(), "-> up"))
	p("  The client's requests: %d before the failure was detected (%d failed), %d after it (%d failed).",
		tallies[1].Requests, len(tallies[1].Errors), tallies[2].Requests, len(tallies[2].Errors))
	if len(tallies[2].Errors) > 0 || tallies[2].Requests == 0 {
		t.Errorf("requests after the failure was detected: %d made, errors %v", tallies[2].Requests, tallies[2].Errors)
	}
	run.stop(t)
}

// lastLine is the last line of log that holds s, without lvsctl's prefix.
func lastLine(log, s string) string {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], s) {
			return strings.TrimPrefix(lines[i], "lvsctl run: ")
		}
	}
	return "(not in the log)"
}
