//go:build lab

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lvskit/lvskit/lab/labtest"
)

// tmuxView is a tmux server holding one window, driven as an admin's
// terminal would be: keys in, the screen's text out.
type tmuxView struct {
	t    *testing.T
	n    *network
	sock string
}

// tmuxStart starts a detached tmux session of w×h columns on host running
// the shell command cmd; the server lives until the test ends.
func (n *network) tmuxStart(host string, w, h int, cmd string) *tmuxView {
	n.t.Helper()
	v := &tmuxView{t: n.t, n: n, sock: n.prefix + "-tmux"}
	n.in(host, func() { v.must("new-session", "-d", "-s", "v", "-x", strconv.Itoa(w), "-y", strconv.Itoa(h), cmd) })
	n.t.Cleanup(func() { v.run("kill-server") })
	return v
}

func (v *tmuxView) run(args ...string) labtest.Result {
	v.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-L", v.sock}, args...)...)
	cmd.Env = append(os.Environ(), "TERM=xterm")
	return labtest.RunCmd(v.t, cmd)
}

func (v *tmuxView) must(args ...string) string {
	v.t.Helper()
	r := v.run(args...)
	if r.Code != 0 {
		v.t.Fatalf("tmux %s: exit %d: %s%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// keys sends keys as tmux names them ("q", "Enter", "Escape"); -l sends
// text literally.
func (v *tmuxView) keys(keys ...string) {
	v.t.Helper()
	v.must(append([]string{"send-keys", "-t", "v"}, keys...)...)
}

// screen is the pane's text, one string a line.
func (v *tmuxView) screen() []string {
	v.t.Helper()
	return strings.Split(strings.TrimRight(v.must("capture-pane", "-p", "-t", "v"), "\n"), "\n")
}

func (v *tmuxView) display(format string) string {
	v.t.Helper()
	return strings.TrimSpace(v.must("display-message", "-p", "-t", "v", format))
}

// waitScreen returns the first screen ok accepts, failing after timeout
// with the last screen.
func (v *tmuxView) waitScreen(what string, timeout time.Duration, ok func([]string) bool) []string {
	v.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := v.screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			v.t.Fatalf("%s: not on the screen within %v:\n%s", what, timeout, strings.Join(s, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lineOf returns the index of the first line holding s, or -1.
func lineOf(lines []string, s string) int {
	for i, l := range lines {
		if strings.Contains(l, s) {
			return i
		}
	}
	return -1
}

// topVIP81 is a second service of the top test, without traffic.
var topVIP81 = seedVIP + ":81"

// topRules is the seed VS/NAT service with servers, and VIP:81 with rs1.
func topRules(servers ...string) string {
	return drainRules(servers...) + "-A -t " + topVIP81 + " -s rr\n-a -t " + topVIP81 + " -r " + seedRS1 + " -m -w 1\n"
}

var drainingRe = regexp.MustCompile(`draining (\d+) conns (\d+)s`)

// TestTopVSNAT: lvsctl top in tmux, on VS/NAT with traffic flowing and rs1
// draining with two open connections: the screen shows both services and
// rs1 draining, its deadline counting down and its active connections
// going from 2 to 1 when one closes; the sort and filter keys reorder and
// narrow the rows; the view redraws whole at 80×24 and at 200×50; q quits
// with status 0 and leaves the alternate screen. Then a batch frame taken
// between two reads of Debian's ipvsadm -Ln --rate holds, for every
// service and real server, the rates of one of them.
func TestTopVSNAT(t *testing.T) {
	n := natNetwork(t, "top")
	if r := n.runIn("dir", topRules(seedRS1, seedRS2), labtest.Ours("lvsctl"), "apply", "-"); r.Code != 0 {
		t.Fatalf("first apply: %+v", r)
	}
	k1, k2 := n.keepAliveTo("rs1"), n.keepAliveTo("rs1")
	defer k2.close()
	stop := make(chan struct{})
	trafficDone := make(chan struct{})
	go func() {
		defer close(trafficDone)
		untilClosed(stop, func() { n.get("client", seedVIP80, 3) })
	}()
	defer func() { close(stop); <-trafficDone }()
	bg := n.lvsctlStart("dir", topRules(seedRS2), "apply", "--drain-timeout", "2m", "-")
	bg.waitLine(t, "drain-start", time.Minute)

	v := n.tmuxStart("dir", 160, 30, labtest.Ours("lvsctl")+" top -d 1; echo top exited $?; sleep 3600")
	rs1 := func(s []string) string {
		i := lineOf(s, seedRS1)
		if i < 0 {
			return ""
		}
		return s[i]
	}
	first := v.waitScreen("rs1 draining with 2 active connections", 20*time.Second, func(s []string) bool {
		return drainingRe.MatchString(rs1(s)) && activeOf(rs1(s)) == 2
	})
	if !strings.HasPrefix(first[0], "lvsctl top - ") || !strings.Contains(first[0], "2 services, 3 real servers  every 1s") ||
		lineOf(first, "-t "+seedVIP80) < 0 || lineOf(first, "-t "+topVIP81) < 0 || lineOf(first, seedRS2) < 0 {
		t.Errorf("first screen:\n%s", strings.Join(first, "\n"))
	}
	secs1, _ := strconv.Atoi(drainingRe.FindStringSubmatch(rs1(first))[2])
	k1.close()
	second := v.waitScreen("rs1 with 1 active connection, its deadline nearer", 20*time.Second, func(s []string) bool {
		m := drainingRe.FindStringSubmatch(rs1(s))
		if m == nil {
			return false
		}
		secs, _ := strconv.Atoi(m[2])
		return activeOf(rs1(s)) == 1 && secs < secs1
	})
	fmt.Printf("lvsctl top in tmux, rs1 draining, before and after one of its two connections closed:\n%s\n%s\n",
		strings.Join(first[:8], "\n"), strings.Join(second[:8], "\n"))

	// Sort: by service, rs1 (172.16.0.2) comes before rs2; by cps, rs2
	// (which takes the new connections) first, VIP:80 before VIP:81.
	if i, j := lineOf(second, seedRS1), lineOf(second, seedRS2); i > j {
		t.Errorf("sorted by service, rs1 should come first:\n%s", strings.Join(second, "\n"))
	}
	v.keys(">", ">", ">")
	byCPS := v.waitScreen("sort cps", 10*time.Second, func(s []string) bool { return strings.HasPrefix(s[1], "sort cps") })
	if a, b, c, d := lineOf(byCPS, "-t "+seedVIP80), lineOf(byCPS, seedRS2), lineOf(byCPS, seedRS1), lineOf(byCPS, "-t "+topVIP81); !(a < b && b < c && c < d) {
		t.Errorf("sorted by cps, want VIP:80, rs2, rs1, VIP:81:\n%s", strings.Join(byCPS, "\n"))
	}
	v.keys("r")
	rev := v.waitScreen("sort cps reversed", 10*time.Second, func(s []string) bool { return strings.HasPrefix(s[1], "sort cps reversed") })
	if a, b := lineOf(rev, "-t "+topVIP81), lineOf(rev, "-t "+seedVIP80); a > b || a < 0 {
		t.Errorf("reversed, VIP:81 should come first:\n%s", strings.Join(rev, "\n"))
	}
	v.keys("r", "<", "<", "<")
	// Filter: rs2's address keeps VIP:80 and rs2 only.
	v.keys("/")
	v.keys("-l", "0.3:8000")
	v.keys("Enter")
	filtered := v.waitScreen("the filter", 10*time.Second, func(s []string) bool { return strings.Contains(s[1], `filter "0.3:8000"`) })
	if lineOf(filtered, seedRS2) < 0 || lineOf(filtered, "-t "+seedVIP80) < 0 || lineOf(filtered, seedRS1) >= 0 || lineOf(filtered, topVIP81) >= 0 {
		t.Errorf("filtered by 0.3:8000:\n%s", strings.Join(filtered, "\n"))
	}
	v.keys("/")
	v.keys("Escape")
	v.waitScreen("the filter cleared", 10*time.Second, func(s []string) bool { return lineOf(s, topVIP81) >= 0 })

	// Resize: the whole view again at each size, nothing left over.
	for _, size := range [][2]int{{80, 24}, {200, 50}, {80, 24}} {
		v.must("resize-window", "-t", "v", "-x", strconv.Itoa(size[0]), "-y", strconv.Itoa(size[1]))
		want := fmt.Sprintf("%dx%d", size[0], size[1])
		if got := v.display("#{window_width}x#{window_height}"); got != want {
			t.Fatalf("window %s, want %s", got, want)
		}
		s := v.waitScreen("the view at "+want, 10*time.Second, func(s []string) bool {
			return len(s) >= 7 && strings.HasPrefix(s[0], "lvsctl top - ") && strings.HasPrefix(s[2], "SERVICE") &&
				strings.Contains(s[2], "FWD") == (size[0] >= 200)
		})
		checkRedraw(t, want, s, size[0])
	}

	v.keys("q")
	after := v.waitScreen("top's exit status", 10*time.Second, func(s []string) bool { return lineOf(s, "top exited") >= 0 })
	if lineOf(after, "top exited 0") < 0 || lineOf(after, "lvsctl top - ") >= 0 || lineOf(after, "SERVICE") >= 0 {
		t.Errorf("after q:\n%s", strings.Join(after, "\n"))
	}
	if alt, cur := v.display("#{alternate_on}"), v.display("#{cursor_flag}"); alt != "0" || cur != "1" {
		t.Errorf("after q the pane is on the alternate screen (%s) or hides its cursor (cursor_flag %s)", alt, cur)
	}

	compareRates(t, n)
}

// activeOf is the ACTIVE column of a real server's line on a screen wide
// enough for every column: the fourth field from the end.
func activeOf(line string) int {
	f := strings.Fields(line)
	if len(f) < 4 {
		return -1
	}
	a, err := strconv.Atoi(f[len(f)-4])
	if err != nil {
		return -1
	}
	return a
}

// checkRedraw asserts a screen of width w holds the header, the status
// line, the column line and the five rows, each line whole: no line wider
// than the window, every row starting with a service or a real server.
func checkRedraw(t *testing.T, size string, s []string, w int) {
	t.Helper()
	rows := 0
	for i, l := range s {
		if len(l) > w {
			t.Errorf("%s: line %d is %d wide", size, i, len(l))
		}
		if i < 3 || l == "" {
			continue
		}
		rows++
		if !strings.HasPrefix(l, "-t "+seedVIP) && !strings.HasPrefix(strings.TrimSpace(l), "172.16.0.") {
			t.Errorf("%s: line %d is not a row: %q", size, i, l)
		}
	}
	if rows != 5 {
		t.Errorf("%s: %d rows, want 5:\n%s", size, rows, strings.Join(s, "\n"))
	}
}

// rateKey names a service ("-t VIP:PORT") or one of its real servers
// ("-t VIP:PORT -r RS:PORT").
type rates map[string][5]string

// refRates parses Debian's ipvsadm -Ln --rate --exact.
func refRates(t *testing.T, out string) rates {
	t.Helper()
	r := rates{}
	svc := ""
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 7 && f[0] == "TCP":
			svc = "-t " + f[1]
			r[svc] = [5]string(f[2:7])
		case len(f) == 7 && f[0] == "->":
			r[svc+" -r "+f[1]] = [5]string(f[2:7])
		}
	}
	if len(r) == 0 {
		t.Fatalf("no rates in:\n%s", out)
	}
	return r
}

// topRates parses a plain-text frame of lvsctl top -b: the numeric
// columns are right-aligned under their names.
func topRates(t *testing.T, frame string) rates {
	t.Helper()
	lines := strings.Split(frame, "\n")
	if len(lines) < 3 {
		t.Fatalf("frame:\n%s", frame)
	}
	head := lines[1]
	cols := []string{"CPS", "INPPS", "OUTPPS", "INBPS", "OUTBPS"}
	var end [5]int
	for i, c := range cols {
		j := strings.Index(head, " "+c+" ")
		if j < 0 {
			t.Fatalf("no column %s in %q", c, head)
		}
		end[i] = j + 1 + len(c)
	}
	r := rates{}
	svc := ""
	for _, l := range lines[2:] {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var v [5]string
		for i := range cols {
			start := strings.LastIndex(l[:end[i]], " ")
			v[i] = l[start+1 : end[i]]
		}
		if strings.HasPrefix(l, "-t ") {
			svc = strings.Join(strings.Fields(l)[:2], " ")
			r[svc] = v
		} else {
			r[svc+" -r "+strings.Fields(l)[0]] = v
		}
	}
	return r
}

// compareRates reads Debian's ipvsadm -Ln --rate --exact, a frame of
// lvsctl top -b -n 1, and ipvsadm again, all within 2 s (else again). The
// kernel updates its estimates once every 2 s, so at most one update
// falls between the two reference reads: each of top's figures is one of the
// two the reference printed (the same when no update fell between).
func compareRates(t *testing.T, n *network) {
	t.Helper()
	for try := 1; ; try++ {
		var ref1, ref2 labtest.Result
		var frame labtest.Result
		start := time.Now()
		n.in("dir", func() {
			ref1 = labtest.Run(t, "", labtest.RefIpvsadm, "-Ln", "--rate", "--exact")
			frame = labtest.Run(t, "", labtest.Ours("lvsctl"), "top", "-b", "-n", "1")
			ref2 = labtest.Run(t, "", labtest.RefIpvsadm, "-Ln", "--rate", "--exact")
		})
		took := time.Since(start)
		if ref1.Code != 0 || ref2.Code != 0 || frame.Code != 0 {
			t.Fatalf("reads: %+v %+v %+v", ref1, frame, ref2)
		}
		if took >= 2*time.Second {
			// A busy VM: two updates may fall in the window. Try again.
			if try == 20 {
				t.Fatalf("20 tries, none read the three within 2 s (the last took %v)", took)
			}
			continue
		}
		a, b, ours := refRates(t, ref1.Stdout), refRates(t, ref2.Stdout), topRates(t, frame.Stdout)
		busy := 0
		for k, want := range a {
			got, ok := ours[k]
			if !ok {
				t.Errorf("%s: not in top's frame", k)
				continue
			}
			if got != want && got != b[k] {
				t.Errorf("%s: top's rates %v, the reference's %v then %v", k, got, want, b[k])
			}
			if want[0] != "0" {
				busy++
			}
		}
		if len(ours) != len(a) || busy < 2 {
			t.Errorf("top has %d rows, the reference %d; %d with connections/s above 0 (want the service and rs2):\n%s\n%s", len(ours), len(a), busy, ref1.Stdout, frame.Stdout)
		}
		fmt.Printf("rates of a batch frame between two reads of ipvsadm -Ln --rate --exact (%v in all):\n%s%s", took.Round(time.Millisecond), ref1.Stdout, frame.Stdout)
		return
	}
}

// TestTopRunHeldOut: while lvsctl run checks the seed service and holds
// rs1 out (its port refuses connections), lvsctl top's frames show rs1
// held out by its check with the check's error whole (as lvsctl status
// has it), and each real server's weight as current/configured: rs1 0/1,
// rs2 2/2; the JSON frame carries the configured weights. Then rs2's port
// refuses too: the service reads ALL DOWN, and rs2, which when_all_down
// keep leaves in, reads kept with its error.
func TestTopRunHeldOut(t *testing.T) {
	n := natNetwork(t, "toprun")
	journal := filepath.Join(t.TempDir(), "journal") // lvsctl makes it 0700
	n.lvsctlRun("dir", "--journal-dir", journal, writeFile(t, "nat.yaml", httpChecked))
	n.waitWeight("dir", seedVIP80, seedRS1, "1", 5*time.Second)
	n.waitWeight("dir", seedVIP80, seedRS2, "2", 5*time.Second)
	n.must("rs1", "iptables", "-I", "INPUT", "-p", "tcp", "--dport", "80", "-j", "REJECT", "--reject-with", "tcp-reset")
	n.waitWeight("dir", seedVIP80, seedRS1, "0", 5*time.Second)
	var frame string
	deadline := time.Now().Add(10 * time.Second)
	for {
		frame = n.must("dir", labtest.Ours("lvsctl"), "top", "-b", "-n", "1", "--journal-dir", journal)
		if strings.Contains(frame, "held out by check") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Printf("lvsctl top -b -n 1 while lvsctl run holds rs1 out:\n%s", frame)
	row := func(server string) []string {
		for _, l := range strings.Split(frame, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == server {
				return f
			}
		}
		t.Fatalf("no row of %s in:\n%s", server, frame)
		return nil
	}
	// result is a real server's last check result as lvsctl status has it.
	result := func(server string) string {
		var st struct {
			Run struct {
				Servers []struct {
					Destination string `json:"destination"`
					Result      string `json:"result"`
				} `json:"servers"`
			} `json:"run"`
		}
		// Exit 1 (a server held out) or 2 (a service all down): the
		// states this test makes.
		r := n.run("dir", labtest.Ours("lvsctl"), "status", "--json", "--journal-dir", journal)
		if r.Code != 1 && r.Code != 2 {
			t.Fatalf("lvsctl status --json: exit %d, want 1 or 2: %+v", r.Code, r)
		}
		js := r.Stdout
		if err := json.Unmarshal([]byte(js), &st); err != nil {
			t.Fatalf("lvsctl status --json: %v\n%s", err, js)
		}
		for _, s := range st.Run.Servers {
			if s.Destination == server && s.Result != "" {
				return s.Result
			}
		}
		t.Fatalf("lvsctl status has no result for %s:\n%s", server, js)
		return ""
	}
	why1 := result(seedRS1)
	r1, r2 := row(seedRS1), row(seedRS2)
	if !strings.Contains(strings.Join(r1, " "), "held out by check ("+why1+")") || r1[len(r1)-2] != "0/1" {
		t.Errorf("rs1 should be held out at weight 0/1 by %q, whole: %q", why1, r1)
	}
	if !strings.Contains(strings.Join(r2, " "), "in service") || r2[len(r2)-2] != "2/2" {
		t.Errorf("rs2 should be in service at weight 2/2: %q", r2)
	}
	js := n.must("dir", labtest.Ours("lvsctl"), "top", "--json", "-n", "1", "--journal-dir", journal)
	for _, want := range []string{`"weight":0,`, `"configured_weight":1`, `"configured_weight":2`, `"state":"held out by check (`} {
		if !strings.Contains(js, want) {
			t.Errorf("JSON frame lacks %s:\n%s", want, js)
		}
	}

	n.must("rs2", "iptables", "-I", "INPUT", "-p", "tcp", "--dport", "8000", "-j", "REJECT", "--reject-with", "tcp-reset")
	deadline = time.Now().Add(10 * time.Second)
	for {
		frame = n.must("dir", labtest.Ours("lvsctl"), "top", "-b", "-n", "1", "--journal-dir", journal)
		if strings.Contains(frame, "ALL DOWN") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Printf("lvsctl top -b -n 1 once rs2 failed its check too:\n%s", frame)
	svc := strings.Join(row("-t"), " ")
	r1, r2 = row(seedRS1), row(seedRS2)
	if !strings.HasPrefix(frame, "lvsctl top - ") || !strings.Contains(strings.SplitN(frame, "\n", 2)[0], " (1 ALL DOWN), ") ||
		!strings.HasPrefix(svc, "-t "+seedVIP80+" - 2 servers ALL DOWN: 1/2 in service") {
		t.Errorf("the service should read ALL DOWN, on its line and the first:\n%s", frame)
	}
	why2 := result(seedRS2)
	if !strings.Contains(strings.Join(r2, " "), "kept in service, all failed ("+why2+")") || r2[len(r2)-2] != "2/2" {
		t.Errorf("rs2 should be kept in service at 2/2 by %q: %q", why2, r2)
	}
	if !strings.Contains(strings.Join(r1, " "), "held out by check ("+why1+")") {
		t.Errorf("rs1 should still be held out by %q: %q", why1, r1)
	}
	js = n.must("dir", labtest.Ours("lvsctl"), "top", "--json", "-n", "1", "--journal-dir", journal)
	for _, want := range []string{`"all_down":["-t ` + seedVIP80 + `"]`, `"state":"ALL DOWN: 1/2 in service","all_down":true`, `"state":"kept in service, all failed (`} {
		if !strings.Contains(js, want) {
			t.Errorf("JSON frame lacks %s:\n%s", want, js)
		}
	}
}
