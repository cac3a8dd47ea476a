//go:build lab

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/lvskit/lvskit/lab/labtest"
)

// TestECMPAnnounce's topology is TestECMP's (newECMPLab): three directors
// behind the BGP ECMP router, mh + mh-port, sloppy TCP, VS/DR, the
// clients on the router. Its directors announce the VIP through lvsctl
// run (the desired state's announce, BIRD's protocol direct on the device
// lvs-announce) instead of BIRD's protocol static beside lvsctl apply,
// which the partition's control keeps.

// The checks of annFile, spelled out so the bounds below follow them:
// the lab's defaults (ecmpChecked says why not tighter).
const (
	annInterval = 2 * time.Second
	annTimeout  = time.Second
	annRise     = 2
	annFall     = 3
	// annDetect is the longest a director's checks take to find every
	// real server failed: fall intervals and the last probe's timeout.
	annDetect = annFall*annInterval + annTimeout
	// annBound bounds a change the checks drive, from the event until
	// the router's route shows it: the checks, run's reconcile, BIRD and
	// BGP, at twice the detection time for the stalls of the emulated VM
	// under load, plus 5 s. The durations themselves are reported: 6.2-13.3
	// s from the partition or the real servers' refusal to the router's
	// change in five runs on 2026-12-07 (13.3 s when dir1's probes fell
	// 1.4 s behind their schedule), against 19 s here.
	annBound = 2*annDetect + 5*time.Second
	// annHoldBound: a withdrawal by the device's going away must reach the
	// router before the hold time could have ended the session. BIRD
	// sends a keepalive every hold/3 s and the router drops a session
	// hold s after the last one came, so hold-hold/3 s at the earliest
	// after a director fell silent; half the hold time is below that. Measured on 2026-12-07: 0.2-3.3 s (five runs).
	annHoldBound = ecmpHold * time.Second / 2
	// annCorrelate: a failed new connection counts as the event's when it
	// started at most this long after the router's route dropped the
	// director. It covers the time between the client's mark and the
	// test's reading of it (the client answers over a pipe) and the
	// 100 ms polling of the route. A connection started after the route
	// dropped the director never reaches it, so none should fail. In
	// five runs on 2026-12-07 the last failure started 1.2-3.4 s before
	// the route dropped dir1, never after: a SYN lost on dir1 is sent
	// again 1 s later, by then on the new route.
	annCorrelate = time.Second
	// The churn client: annRate new connections a second, whatever
	// became of the ones before (clients that keep arriving); one not
	// answered within annOpen has failed (the first SYN and one
	// retransmission, 1 s later).
	annRate = 40
	annOpen = 3 * time.Second
	// annControlWindow: how long the control's partition lasts.
	annControlWindow = 20 * time.Second
	// annQuiet: how long the churn runs past a withdrawal, to show that
	// no connection fails after it.
	annQuiet = 10 * time.Second
)

var annVIPPrefix = ecmpVIP + "/32"

// annFile is the directors' desired state: the TCP half of the ECMP
// service, every real server checked, the VIP announced. The UDP half is
// left out: a service without checks counts its real servers in service
// whatever happens to them, and would keep the VIP announced when every
// TCP server failed.
func annFile(whenAllDown string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `version: 2
announce: {when_all_down: %s}
services:
  - protocol: tcp
    address: %s
    port: %s
    scheduler: mh
    scheduler_flags: [mh-port]
    check: {type: tcp, interval: %s, timeout: %s, rise: %d, fall: %d}
    destinations:
`, whenAllDown, ecmpVIP, ecmpPort, annInterval, annTimeout, annRise, annFall)
	for _, rs := range ecmpRSs {
		fmt.Fprintf(&b, "      - {address: %s, port: %s, method: route, weight: 1}\n", ecmpAddr[rs], ecmpPort)
	}
	return b.String()
}

// annLab is the ECMP lab with lvsctl run on the directors.
type annLab struct {
	*ecmpLab
	file     string
	when     string // the file's when_all_down
	journals map[string]string
	runs     map[string]*annRun
	// static: the directors announce by protocol static beside lvsctl
	// apply (newECMPLab's start), not through lvsctl run.
	static bool
	// rejects are the iptables rules the scenario put on real servers,
	// taken out before the next one.
	rejects map[string][][]string
	stalls  *stallProc
}

func newAnnLab(t *testing.T) *annLab {
	l := &annLab{ecmpLab: newECMPLab(t), journals: map[string]string{}, runs: map[string]*annRun{},
		static: true, rejects: map[string][][]string{}}
	l.file = filepath.Join(l.dir, "director.yaml")
	l.stalls = l.watchStalls()
	for _, d := range ecmpDirs {
		l.journals[d] = filepath.Join(l.dir, d+"-journal")
	}
	t.Cleanup(func() {
		for _, r := range l.runs {
			r.kill()
		}
	})
	return l
}

// annRun is lvsctl run on a director, its log kept with the time each
// line came.
type annRun struct {
	host  string
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []runLine
	done  chan struct{}
}

type runLine struct {
	at   time.Time
	text string
}

func (l *annLab) startRun(d string) *annRun {
	l.t.Helper()
	cmd := exec.Command(labtest.Ours("lvsctl"), "run", "--journal-dir", l.journals[d], "--drain-timeout", "0", "--max-delete", "100", l.file)
	errp, err := cmd.StderrPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	l.in(d, func() { err = cmd.Start() })
	if err != nil {
		l.t.Fatal(err)
	}
	r := &annRun{host: d, cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(errp)
		for sc.Scan() {
			r.mu.Lock()
			r.lines = append(r.lines, runLine{time.Now(), sc.Text()})
			r.mu.Unlock()
		}
		cmd.Wait()
		close(r.done)
	}()
	l.runs[d] = r
	return r
}

func (r *annRun) kill() {
	r.cmd.Process.Kill()
	<-r.done
}

// stop ends the run with SIGTERM (it withdraws everything as it stops).
func (r *annRun) stop(t *testing.T) {
	t.Helper()
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("lvsctl run on %s did not stop on SIGTERM", r.host)
	}
}

// seen returns the time of the first log line at or after index from
// containing s, and the index after it; ok false when there is none.
func (r *annRun) seen(s string, from int) (at time.Time, next int, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := from; i < len(r.lines); i++ {
		if strings.Contains(r.lines[i].text, s) {
			return r.lines[i].at, i + 1, true
		}
	}
	return time.Time{}, len(r.lines), false
}

func (r *annRun) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lines)
}

// waitLog waits, at most bound, for a log line from index from on
// containing s, and returns when it came.
func (r *annRun) waitLog(t *testing.T, s string, from int, bound time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		if at, _, ok := r.seen(s, from); ok {
			return at
		}
		if time.Now().After(deadline) {
			t.Fatalf("lvsctl run on %s did not log %q within %v", r.host, s, bound)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *annRun) text(since time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, ln := range r.lines {
		if !ln.at.Before(since) {
			fmt.Fprintf(&b, "%s %s\n", ln.at.Format("15:04:05.000"), ln.text)
		}
	}
	return b.String()
}

// toAnnounce makes every director announce through lvsctl run of annFile
// with when_all_down when (BIRD with protocol direct), and waits until
// the router has all three.
func (l *annLab) toAnnounce(when string) {
	l.t.Helper()
	if !l.static && l.when == when {
		return
	}
	if err := os.WriteFile(l.file, []byte(annFile(when)), 0o644); err != nil {
		l.t.Fatal(err)
	}
	if !l.static {
		// The same runs reload the file (SIGHUP).
		for _, d := range ecmpDirs {
			r := l.runs[d]
			n := r.count()
			r.cmd.Process.Signal(syscall.SIGHUP)
			r.waitLog(l.t, "reloaded", n, 30*time.Second)
		}
		l.when = when
		return
	}
	for _, d := range ecmpDirs {
		if _, ok := l.bird[d]; ok {
			l.stopBird(d)
		}
		l.startBird(d, announceBirdConfig(ecmpAddr[d], ecmpDirAS, ecmpRouter, ecmpAS, ecmpHold))
		l.startRun(d)
	}
	l.static, l.when = false, when
	l.waitNexthops(ecmpDirs...)
}

// toStatic makes every director announce as TestECMP's do: run stopped,
// the rules from lvsctl apply, BIRD with protocol static.
func (l *annLab) toStatic() {
	l.t.Helper()
	if l.static {
		return
	}
	for _, d := range ecmpDirs {
		if r := l.runs[d]; r != nil {
			r.stop(l.t)
			delete(l.runs, d)
		}
		if _, ok := l.bird[d]; ok {
			l.stopBird(d)
		}
		l.apply(d, ecmpRules(mhSched, ecmpRSs...), 0)
		l.startBird(d, directorBird(d))
	}
	l.static = true
	l.waitNexthops(ecmpDirs...)
}

// iptables puts a rule first in a real server's INPUT chain until the
// scenario ends.
func (l *annLab) iptables(rs string, rule ...string) {
	l.t.Helper()
	l.must(rs, "iptables", append([]string{"-I", "INPUT"}, rule...)...)
	l.rejects[rs] = append(l.rejects[rs], rule)
}

// clearRules takes out every rule iptables put.
func (l *annLab) clearRules() {
	l.t.Helper()
	for rs, rules := range l.rejects {
		for _, rule := range rules {
			l.must(rs, "iptables", append([]string{"-D", "INPUT"}, rule...)...)
		}
		delete(l.rejects, rs)
	}
}

var etherRE = regexp.MustCompile(`link/ether (\S+)`)

// mac is a host's eth0 hardware address.
func (l *annLab) mac(host string) string {
	l.t.Helper()
	m := etherRE.FindStringSubmatch(l.must(host, ipCmd, "-o", "link", "show", "eth0"))
	if m == nil {
		l.t.Fatalf("%s: no MAC address on eth0", host)
	}
	return m[1]
}

// routes is the router's view for the log: the kernel's route to the
// VIP, and BIRD's routes with their next hops.
func (l *annLab) routes() string {
	l.t.Helper()
	k := strings.TrimSpace(l.must("router", ipCmd, "-4", "route", "show", ecmpVIP+"/32"))
	if k == "" {
		k = "(no route)"
	}
	// birdc exits 1 when it has no route to the VIP.
	b := l.run("router", "/usr/sbin/birdc", "-s", l.bird["router"].ctl, "show", "route", "for", ecmpVIP)
	return "kernel: " + strings.ReplaceAll(k, "\n", " ") + "\nbirdc show route:\n" + b.Stdout + b.Stderr
}

var ifindexRE = regexp.MustCompile(`^(\d+): `)

// announceDev is the interface index of a director's lvs-announce (""
// without one) and whether it holds the VIP.
func (l *annLab) announceDev(d string) (ifindex string, vip bool) {
	l.t.Helper()
	r := l.run(d, ipCmd, "-o", "addr", "show", "dev", "lvs-announce")
	if r.Code != 0 {
		return "", false
	}
	if m := ifindexRE.FindStringSubmatch(r.Stdout); m != nil {
		ifindex = m[1]
	}
	return ifindex, strings.Contains(r.Stdout, " "+annVIPPrefix+" ")
}

// nexthopDirs are the router's next hops by director name.
func (l *annLab) nexthopDirs() []string {
	l.t.Helper()
	var dirs []string
	for _, h := range l.nexthops() {
		for _, d := range ecmpDirs {
			if ecmpAddr[d] == h {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}

// diagnose logs what a failed scenario leaves to read: the router's
// routes and sessions, every run's log since the scenario started, the
// announcing device and BIRD's log on every director, and the
// directors' connection tables (counts).
func (l *annLab) diagnose(t *testing.T, since time.Time) {
	p := l.run("router", "/usr/sbin/birdc", "-s", l.bird["router"].ctl, "show", "protocols")
	t.Logf("router, at the failure:\n%s\nbirdc show protocols:\n%s%s", l.routes(), p.Stdout, p.Stderr)
	for _, d := range ecmpDirs {
		dev := l.run(d, ipCmd, "-o", "addr", "show", "dev", "lvs-announce")
		t.Logf("%s: lvs-announce: %s%s", d, dev.Stdout, dev.Stderr)
		if r := l.runs[d]; r != nil {
			t.Logf("%s: lvsctl run's log since the scenario's start:\n%s", d, tail(r.text(since), 60))
		}
	}
	for _, h := range append([]string{"router"}, ecmpDirs...) {
		b, _ := os.ReadFile(filepath.Join(l.dir, h+".log"))
		t.Logf("%s: BIRD's log:\n%s", h, tail(string(b), 20))
	}
	st := l.stalls.report(t)
	t.Logf("the VM stood still (stall watch, %v or more) since the scenario's start: %v (%d more not kept)", stallMin, st.overlapping(since, time.Now()), st.Dropped)
	l.logConnTables(t, nil)
}

// sub runs a scenario as a subtest, from the same start whatever the one
// before left: no rule on the real servers, every director announcing
// (static: by protocol static, else through lvsctl run of annFile with
// when_all_down withdraw), the router through all three.
func (l *annLab) sub(t *testing.T, name string, static bool, f func(t *testing.T)) {
	t.Run(name, func(st *testing.T) {
		l.t = st
		defer func() { l.t = t }()
		start := time.Now()
		defer func() {
			if st.Failed() {
				l.diagnose(st, start)
			}
		}()
		l.clearRules()
		if static {
			l.toStatic()
		} else {
			l.toAnnounce("withdraw")
		}
		for _, d := range ecmpDirs {
			l.sloppy(d, true)
		}
		l.waitNexthops(ecmpDirs...)
		f(st)
	})
}

// roleProc is a client role on the router (churn, stalls) that answers a
// JSON line per command on its stdin.
type roleProc struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

func (l *annLab) role(name string, args ...string) *roleProc {
	l.t.Helper()
	p := &roleProc{t: l.t, name: name, lines: make(chan string, 16)}
	p.cmd, p.in = l.client(name, p.lines, args...)
	return p
}

func (p *roleProc) read(v any) {
	p.t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.cmd.Wait()
			p.t.Fatalf("%s client ended (%v)", p.name, p.cmd.ProcessState)
		}
		if err := json.Unmarshal([]byte(line), v); err != nil {
			p.t.Fatalf("%s client: %v in %q", p.name, err, line)
		}
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		p.t.Fatalf("%s client: no answer in 30s", p.name)
	}
}

// ask sends cmd and reads the answer into v.
func (p *roleProc) ask(cmd string, v any) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, cmd+"\n"); err != nil {
		p.t.Fatalf("%s client: %v", p.name, err)
	}
	p.read(v)
}

func (p *roleProc) quit() {
	p.t.Helper()
	if _, err := io.WriteString(p.in, "quit\n"); err != nil {
		p.t.Fatalf("%s client: %v", p.name, err)
	}
	awaitQuit(p.t, p.cmd, p.name)
}

// churnProc is the churn client on the router.
type churnProc struct{ *roleProc }

func (l *annLab) churn() *churnProc {
	l.t.Helper()
	c := &churnProc{l.role("churn", ecmpVIPPort, itoa(annRate), annOpen.String())}
	var ready map[string]bool
	c.read(&ready)
	return c
}

// mark starts a new tally and returns when the client answered.
func (c *churnProc) mark() time.Time {
	c.t.Helper()
	var ok map[string]bool
	c.ask("mark", &ok)
	return time.Now()
}

func (c *churnProc) report() churnReport {
	c.t.Helper()
	var r churnReport
	c.ask("report", &r)
	return r
}

// stallProc is the stall watch (stallWatch), for the whole test.
type stallProc struct{ *roleProc }

func (l *annLab) watchStalls() *stallProc {
	l.t.Helper()
	s := &stallProc{l.role("stalls")}
	var ready map[string]bool
	s.read(&ready)
	if !ready["real_time"] {
		l.t.Fatal("the stall watch did not get real-time priority: it could not tell a stall of the VM from the guest's own load")
	}
	return s
}

// report is what the watch saw, read for t (the watch outlives subtests).
func (s *stallProc) report(t *testing.T) stallReport {
	t.Helper()
	s.t = t
	var r stallReport
	s.ask("report", &r)
	return r
}

// annStalled: a failed new connection is the VM's, not the directors',
// when the whole VM stood still for at least this much of its annOpen
// (stallWatch; why a second: docs/decisions/0018-lab-host-starvation.md).
const annStalled = time.Second

// lateFailures counts the failures that started more than d after mark
// (when the client was marked), apart from those the VM's stalls explain
// (annStalled), which it lists with the stalls that explain them.
func (r churnReport) lateFailures(mark time.Time, d time.Duration, st stallReport) (late int, stalled []int64, stalls []stall) {
	seen := map[stall]bool{}
	for _, ms := range r.FailedAtMS {
		if ms <= d.Milliseconds() {
			continue
		}
		start := mark.Add(time.Duration(ms) * time.Millisecond)
		if st.stalledFor(start, start.Add(annOpen)) < annStalled {
			late++
			continue
		}
		stalled = append(stalled, ms)
		for _, s := range st.overlapping(start, start.Add(annOpen)) {
			if !seen[s] {
				seen[s] = true
				stalls = append(stalls, s)
			}
		}
	}
	return late, stalled, stalls
}

// checkLate fails t when new connections failed that started more than d
// after mark, what (the event) being why none should; those the VM's
// stalls explain are logged, and fail t only when they are most of the
// attempts, which leaves too few to show anything.
func (l *annLab) checkLate(t *testing.T, r churnReport, mark time.Time, d time.Duration, what string) {
	t.Helper()
	st := l.stalls.report(t)
	late, stalled, stalls := r.lateFailures(mark, d, st)
	attempts, _ := r.Window(int(d/time.Second)+1, len(r.BySecond))
	if len(stalled) > 0 {
		t.Logf("%d new connections that failed after %s started while the whole VM stood still %v or more of their %v (at %v ms; stalls %v): the host's, not the directors'",
			len(stalled), what, annStalled, annOpen, stalled, stalls)
	}
	if n := len(r.FailedAtMS); late+len(stalled) > 0 && n > 0 {
		first := mark.Add(time.Duration(r.FailedAtMS[0])*time.Millisecond - 3*time.Second)
		last := mark.Add(time.Duration(r.FailedAtMS[n-1])*time.Millisecond + annOpen + time.Second)
		t.Logf("the VM around the failures, second by second:\n%s", joinLines(st.load(first, last)))
	}
	if late != 0 || attempts == 0 {
		t.Errorf("%d new connections failed that started after %s (+%v); want 0 (of %d)", late, what, annCorrelate, attempts)
	}
	if 2*len(stalled) > attempts {
		t.Errorf("%d of the %d new connections started after %s failed across stalls of the VM: too few measured to show anything", len(stalled), attempts, what)
	}
}

// last is the start of the last failure after the mark (0 without one).
func (r churnReport) last() time.Duration {
	if len(r.FailedAtMS) == 0 {
		return 0
	}
	return time.Duration(r.FailedAtMS[len(r.FailedAtMS)-1]) * time.Millisecond
}

func (r churnReport) String() string {
	return fmt.Sprintf("%d of %d new connections failed (%.1f %%; %s) over %.1f s (%d not started: too many under way); by real server %s; first error %q",
		r.Failed, r.Attempts, pct(r.Failed, r.Attempts), sortedCounts(r.Reasons), float64(r.SpanMS)/1000, r.Skipped, sortedCounts(r.ByServer), r.FirstError)
}

// annResults is what TestECMPAnnounce measured, for its report.
type annResults struct{ figures []ecmpFigure }

func (res *annResults) add(scenario, result, control string) {
	res.figures = append(res.figures, ecmpFigure{scenario, result, control})
}

func (res *annResults) table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "scenario\tresult\tcontrol")
	for _, f := range res.figures {
		fmt.Fprintf(w, "%s\t%s\t%s\n", f.scenario, f.result, f.control)
	}
	w.Flush()
	return b.String()
}

// waitNexthopsWithin is waitNexthops bounded by bound from since: it
// returns when the router's route went through exactly dirs.
func (l *annLab) waitNexthopsWithin(since time.Time, bound time.Duration, dirs ...string) time.Time {
	l.t.Helper()
	for {
		got := l.nexthopDirs()
		if slices.Equal(got, dirs) {
			return time.Now()
		}
		if time.Since(since) > bound {
			l.t.Fatalf("router's next hops %v, want %v within %v of the event", got, dirs, bound)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestECMPAnnounce proves route health injection with real traffic: the
// directors announce the VIP through lvsctl run, and the router follows
// their checks, their life and their maintenance. One boot; each
// scenario starts from every director announcing, so one can run alone
// (-run 'TestECMPAnnounce/maintenance').
func TestECMPAnnounce(t *testing.T) {
	l := newAnnLab(t)
	started := time.Now()
	var res annResults
	l.sub(t, "partition", true, func(t *testing.T) { l.partition(t, &res) })
	l.sub(t, "run killed", false, func(t *testing.T) { l.runKilled(t, &res) })
	l.sub(t, "maintenance", false, func(t *testing.T) { l.maintenance(t, &res) })
	l.sub(t, "all real servers down", false, func(t *testing.T) { l.allDown(t, &res) })
	t.Logf("ECMP with announcement through lvsctl run, %d directors, checks every %v (timeout %v, rise %d, fall %d), BGP hold %d s; %d new connections a second (failed when not answered within %v); scenarios in %.0f s; %s:\n%s",
		len(ecmpDirs), annInterval, annTimeout, annRise, annFall, ecmpHold, annRate, annOpen, time.Since(started).Seconds(), l.stalls.report(t).summary(), res.table())
}

// partition cuts dir1 off from every real server (they drop its frames:
// its checks and the packets it forwards are lost) while new connections
// keep coming. The control announces by protocol static and keeps
// drawing a third of them to dir1; through lvsctl run, dir1's checks
// fail, run withdraws, and new connections fail only until the router
// dropped dir1.
func (l *annLab) partition(t *testing.T, res *annResults) {
	mac := l.mac("dir1")
	cut := func() {
		for _, rs := range ecmpRSs {
			l.iptables(rs, "-m", "mac", "--mac-source", mac, "-j", "DROP")
		}
	}
	c := l.churn()
	defer c.quit()

	// The control: static announcement, the partition held for a fixed
	// window, and annOpen longer so that every connection started in the
	// window has ended when the report counts them.
	time.Sleep(2 * time.Second)
	base := c.report()
	t.Logf("static, before the partition: %s", base)
	c.mark()
	cut()
	time.Sleep(annControlWindow + annOpen + 500*time.Millisecond)
	ctl := c.report()
	win := int(annControlWindow / time.Second)
	ctlAttempts, ctlFailed := ctl.Window(0, win)
	t.Logf("static announcement, dir1 partitioned: %d of %d new connections started in the first %d s failed (%.1f %%); in all %s; router: %v",
		ctlFailed, ctlAttempts, win, pct(ctlFailed, ctlAttempts), ctl, l.nexthopDirs())
	l.clearRules()
	// The partition must cost the control connections, or it cut nothing.
	if ctlFailed == 0 {
		t.Errorf("control: none of %d new connections failed with dir1 cut off and still announced", ctlAttempts)
	}

	// Announcement through lvsctl run.
	l.toAnnounce("withdraw")
	time.Sleep(3 * time.Second)
	c.mark()
	time.Sleep(10 * time.Second)
	quiet := c.report()
	t.Logf("announcing, nothing happening: %s", quiet)
	run1 := l.runs["dir1"]
	from := run1.count()
	mark := c.mark()
	cut()
	lost := l.waitNexthopsWithin(mark, annBound, "dir2", "dir3").Sub(mark)
	withdrawnAt, _, ok := run1.seen("not announcing "+annVIPPrefix, from)
	withdrawn := withdrawnAt.Sub(mark)
	time.Sleep(annQuiet)
	r := c.report()
	limit := lost + annCorrelate
	late, _, _ := r.lateFailures(mark, limit, l.stalls.report(t))
	inAttempts, inFailed := r.Window(0, int(lost/time.Second)+1)
	t.Logf("announcing, dir1 partitioned: %s; route dropped dir1 %.2f s after the partition (run withdrew after %.2f s); %d of %d started until then failed; failures started at %v ms, the last %.2f s after the partition; %d started more than %.2f s after it, apart from stalls of the VM",
		r, lost.Seconds(), withdrawn.Seconds(), inFailed, inAttempts, r.FailedAtMS, r.last().Seconds(), late, limit.Seconds())
	t.Logf("dir1's lvsctl run since the partition:\n%s", run1.text(mark.Add(-time.Second)))
	if !ok {
		t.Errorf("dir1's run did not log withdrawing %s", annVIPPrefix)
	}
	l.checkLate(t, r, mark, limit, "the router dropped dir1")

	// The partition ends: dir1's checks pass again (rise), run announces,
	// the router takes dir1 back; new connections meanwhile, and
	// long-lived ones opened while dir1 was out, a third of which the
	// router moves to dir1 when it returns. Those are reported, not
	// asserted: run announces once one real server is in service, and
	// until every server has passed its rise checks again dir1's mh
	// table is not the others', so a moved connection may reach another
	// real server.
	f := l.flowsEvery(0, ecmpHealthInterval)
	for deadline := time.Now().Add(30 * time.Second); openNow(f.report()) < ecmpFlows && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
	}
	f.mark()
	from = run1.count()
	mark = c.mark()
	l.clearRules()
	back := l.waitNexthopsWithin(mark, annBound, ecmpDirs...).Sub(mark)
	time.Sleep(annOpen)
	rb := c.report()
	fb := f.settle(f.clock(), 3*time.Second, ecmpControlWatch)
	f.quit()
	announcedAt, _, _ := run1.seen("announcing "+annVIPPrefix, from)
	t.Logf("partition over: router has dir1 again %.2f s after (run announced after %.2f s); new connections: %s; failures at %v ms; long-lived: %d of %d broke (%s; by real server %s), %d silent; dir1's lvsctl run since:\n%s",
		back.Seconds(), announcedAt.Sub(mark).Seconds(), rb, rb.FailedAtMS, fb.Broken, fb.AtMark, sortedCounts(fb.Reasons), sortedCounts(fb.BrokenByServer), fb.Pending, run1.text(mark.Add(-time.Second)))
	res.add("dir1 cut off from the real servers, new connections arriving (a failure: not answered within 3 s)",
		fmt.Sprintf("through lvsctl run: %d of %d failed (of those started until the route dropped dir1: %d of %d), the last started %.1f s after the cut; %d after the route dropped dir1 (%.1f s; run withdrew at %.1f s); nothing happening: %d of %d; dir1's return: %d of %d failed, long-lived %d of %d broken",
			r.Failed, r.Attempts, inFailed, inAttempts, r.last().Seconds(), late, lost.Seconds(), withdrawn.Seconds(), quiet.Failed, quiet.Attempts, rb.Failed, rb.Attempts, fb.Broken+fb.Pending, fb.AtMark),
		fmt.Sprintf("protocol static: %d of %d started in %d s failed (%.1f %%), to the end", ctlFailed, ctlAttempts, win, pct(ctlFailed, ctlAttempts)))
}

// runKilled SIGKILLs lvsctl run on dir2 with long-lived connections and
// new ones running: its device goes with it and BIRD withdraws at once,
// well before the hold time. Restarted, run announces after its checks,
// and the router's taking dir2 back breaks no long-lived connection.
func (l *annLab) runKilled(t *testing.T, res *annResults) {
	f := l.flowsEvery(0, ecmpHealthInterval)
	defer f.quit()
	c := l.churn()
	defer c.quit()
	deadline := time.Now().Add(30 * time.Second)
	for openNow(f.report()) < ecmpFlows && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}
	f.mark()
	mark := c.mark()
	l.runs["dir2"].kill()
	killed := time.Now()
	lost := l.waitNexthopsWithin(killed, annHoldBound, "dir1", "dir3")
	// The session stays up: the route went because the device did.
	if out := l.birdc("router", "show", "protocols", "director_10_2_0_12"); !strings.Contains(out, "Established") {
		t.Errorf("the router's session with dir2 after the kill is not Established:\n%s", out)
	}
	if r := l.run("dir2", ipCmd, "link", "show", "lvs-announce"); r.Code == 0 {
		t.Errorf("lvs-announce still on dir2 after run was killed:\n%s", r.Stdout)
	}
	time.Sleep(annQuiet)
	kr := f.settle(f.clock(), 3*time.Second, ecmpWatch)
	cr := c.report()
	t.Logf("run SIGKILLed on dir2: the router dropped dir2 after %.2f s; new connections: %s, failures at %v ms; long-lived: %d of %d broke (%s), %d silent",
		lost.Sub(killed).Seconds(), cr, cr.FailedAtMS, kr.Broken, kr.AtMark, sortedCounts(kr.Reasons), kr.Pending)
	l.checkLate(t, cr, mark, lost.Sub(mark)+annCorrelate, "the router dropped dir2")

	// The restart: run announces after its first checks, and only then
	// does the router take dir2 back.
	f.mark()
	c.mark()
	restart := time.Now()
	restart0 := restart
	r2 := l.startRun("dir2")
	var back time.Time
	for {
		if slices.Contains(l.nexthopDirs(), "dir2") {
			back = time.Now()
			break
		}
		if time.Since(restart) > annBound {
			t.Fatalf("the router has not taken dir2 back %v after run's restart: %v", annBound, l.nexthopDirs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	announced, _, ok := r2.seen("announcing "+annVIPPrefix, 0)
	if !ok || announced.After(back) {
		t.Errorf("the router took dir2 back %v after the restart, before run's log said it announced (%v, seen %v)", back.Sub(restart), announced.Sub(restart), ok)
	}
	l.waitNexthops(ecmpDirs...)
	rr := f.settle(f.clock(), 3*time.Second, ecmpWatch)
	crr := c.report()
	t.Logf("run restarted on dir2: announced after %.2f s, the router had dir2 again after %.2f s; long-lived: %d of %d broke (%s), %d silent, all flowing again after %d ms; new connections: %s",
		announced.Sub(restart).Seconds(), back.Sub(restart).Seconds(), rr.Broken, rr.AtMark, sortedCounts(rr.Reasons), rr.Pending, rr.RecoveryMS, crr)
	if rr.Broken+rr.Pending != 0 || rr.AtMark != ecmpFlows {
		l.logConnTables(t, rr.BrokenPorts)
		t.Errorf("dir2's return: %d of %d long-lived connections broke, %d silent; want 0 of %d", rr.Broken, rr.AtMark, rr.Pending, ecmpFlows)
	}

	// Killed and restarted at once, as a supervisor does: the new run
	// may find the old device still there (it goes with its network
	// namespace, which the kernel frees after the process), and must
	// announce all the same once it is gone, not at its next resync.
	f.mark()
	old, _ := l.announceDev("dir2")
	l.runs["dir2"].kill()
	restart = time.Now()
	r3 := l.startRun("dir2")
	for {
		if idx, vip := l.announceDev("dir2"); idx != "" && idx != old && vip {
			break
		}
		if time.Since(restart) > annBound {
			t.Fatalf("run killed and restarted at once on dir2: no new device with the VIP after %v (run's log:\n%s)", annBound, r3.text(restart))
		}
		time.Sleep(100 * time.Millisecond)
	}
	again := time.Now()
	l.waitNexthops(ecmpDirs...)
	_, _, busy := r3.seen("cannot announce", 0)
	ri := f.settle(f.clock(), 3*time.Second, ecmpWatch)
	t.Logf("run killed and restarted at once on dir2: the new device held the VIP after %.2f s (the old device was still there at the first try: %v); long-lived: %d of %d broke, %d silent",
		again.Sub(restart).Seconds(), busy, ri.Broken, ri.AtMark, ri.Pending)
	if ri.Broken+ri.Pending != 0 {
		l.logConnTables(t, ri.BrokenPorts)
		t.Errorf("run killed and restarted at once on dir2: %d of %d long-lived connections broke, %d silent; want 0", ri.Broken, ri.AtMark, ri.Pending)
	}
	res.add("lvsctl run SIGKILLed on dir2, then restarted",
		fmt.Sprintf("route dropped dir2 %.1f s after the kill (BGP session up; hold %d s); new connections %d of %d failed; restarted: announced after %.1f s, router had dir2 at %.1f s; long-lived %d of %d broken by the return; killed and restarted at once: announced after %.1f s, %d of %d broken",
			lost.Sub(killed).Seconds(), ecmpHold, cr.Failed, cr.Attempts, announced.Sub(restart0).Seconds(), back.Sub(restart0).Seconds(), rr.Broken+rr.Pending, rr.AtMark,
			again.Sub(restart).Seconds(), ri.Broken+ri.Pending, ri.AtMark),
		fmt.Sprintf("long-lived across the kill: %d of %d broken", kr.Broken+kr.Pending, kr.AtMark))
}

// maintenance takes dir3 out with lvsctl withdraw --wait and back with
// lvsctl announce, long-lived and new connections running.
func (l *annLab) maintenance(t *testing.T, res *annResults) {
	f := l.flowsEvery(0, ecmpHealthInterval)
	defer f.quit()
	c := l.churn()
	defer c.quit()
	from := map[string]int{}
	for _, d := range ecmpDirs {
		from[d] = l.runs[d].count()
	}
	cpu0, drops0 := cpuTimes(t), softnetDrops(t)
	deadline := time.Now().Add(30 * time.Second)
	for openNow(f.report()) < ecmpFlows && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}
	l.settleChecks(t, from)
	t.Logf("router before the withdrawal:\n%s", l.routes())
	f.mark()
	c.mark()
	start := time.Now()
	w := l.lvsctlStart("dir3", "", "withdraw", "--journal-dir", l.journals["dir3"], "--wait", "60s", "--quiet", "5s")
	lost := l.waitNexthopsWithin(start, 30*time.Second, "dir1", "dir2")
	t.Logf("router during the withdrawal (%.2f s after lvsctl withdraw started):\n%s", lost.Sub(start).Seconds(), l.routes())
	code, out := w.wait(t, 90*time.Second)
	took := time.Since(start)
	t.Logf("lvsctl withdraw --wait 60s --quiet 5s on dir3: exit %d after %.1f s:\n%s", code, took.Seconds(), strings.Join(out, "\n"))
	if code != 0 || !strings.Contains(strings.Join(out, "\n"), "moved:") {
		t.Errorf("lvsctl withdraw on dir3: exit %d, want 0 and a \"moved:\" line", code)
	}
	if got := l.nexthopDirs(); !slices.Equal(got, []string{"dir1", "dir2"}) {
		t.Errorf("after lvsctl withdraw on dir3 the router's next hops are %v", got)
	}
	a := l.run("dir3", labtest.Ours("lvsctl"), "announce", "--journal-dir", l.journals["dir3"])
	again := time.Now()
	t.Logf("lvsctl announce on dir3: exit %d\n%s%s", a.Code, a.Stdout, a.Stderr)
	if a.Code != 0 || !strings.Contains(a.Stdout, "announced "+annVIPPrefix) {
		t.Errorf("lvsctl announce on dir3: exit %d, want 0 and \"announced %s\"", a.Code, annVIPPrefix)
	}
	backAt := l.waitNexthopsWithin(again, 30*time.Second, ecmpDirs...)
	t.Logf("router after lvsctl announce (%.2f s):\n%s", backAt.Sub(again).Seconds(), l.routes())
	r := f.settle(f.clock(), 3*time.Second, ecmpWatch)
	cr := c.report()
	t.Logf("maintenance of dir3: long-lived %d of %d broke (%s), %d silent; new connections: %s, failures at %v ms",
		r.Broken, r.AtMark, sortedCounts(r.Reasons), r.Pending, cr, cr.FailedAtMS)
	if r.Broken+r.Pending != 0 || r.AtMark != ecmpFlows {
		l.logConnTables(t, r.BrokenPorts)
		t.Errorf("maintenance of dir3: %d of %d long-lived connections broke, %d silent; want 0 of %d (%s)", r.Broken, r.AtMark, r.Pending, ecmpFlows,
			l.checkTrouble(from, cpu0, drops0))
	}
	res.add("maintenance of dir3: lvsctl withdraw --wait 60s --quiet 5s, then lvsctl announce",
		fmt.Sprintf("route dropped dir3 after %.1f s, withdraw exited 0 after %.1f s, back %.1f s after announce; long-lived %d of %d broken; new connections %d of %d failed",
			lost.Sub(start).Seconds(), took.Seconds(), backAt.Sub(again).Seconds(), r.Broken+r.Pending, r.AtMark, cr.Failed, cr.Attempts), "—")
}

// allDown makes every real server refuse the port: with announce's
// default (withdraw) every director withdraws and the router has no route
// to the VIP; with when_all_down keep they go on announcing.
func (l *annLab) allDown(t *testing.T, res *annResults) {
	reject := []string{"-p", "tcp", "--dport", ecmpPort, "-j", "REJECT", "--reject-with", "tcp-reset"}
	down := func() {
		for _, rs := range ecmpRSs {
			l.iptables(rs, reject...)
		}
	}
	// withdraw
	from := map[string]int{}
	for _, d := range ecmpDirs {
		from[d] = l.runs[d].count()
	}
	start := time.Now()
	down()
	gone := l.waitNexthopsWithin(start, annBound, []string(nil)...).Sub(start)
	t.Logf("when_all_down withdraw, every real server refusing: router has no route after %.2f s:\n%s", gone.Seconds(), l.routes())
	for _, d := range ecmpDirs {
		if _, _, ok := l.runs[d].seen("not announcing "+annVIPPrefix+": no real server in service", from[d]); !ok {
			t.Errorf("%s: run did not log withdrawing %s for want of a real server", d, annVIPPrefix)
		}
	}
	// Back: every director announces again once a server passes rise
	// checks.
	l.clearRules()
	upAgain := time.Now()
	l.waitNexthopsWithin(upAgain, annBound, ecmpDirs...)
	t.Logf("real servers answering again: the router has all three directors after %.2f s", time.Since(upAgain).Seconds())

	// keep
	l.toAnnounce("keep")
	for _, d := range ecmpDirs {
		from[d] = l.runs[d].count()
	}
	start = time.Now()
	down()
	for _, d := range ecmpDirs {
		l.runs[d].waitLog(t, "ALL REAL SERVERS OF", from[d], annBound)
	}
	failedAt := time.Now()
	// Watched for one more detection time after every run found all
	// failed: the route must keep all three throughout.
	var lostAny []string
	for time.Since(failedAt) < annDetect {
		if got := l.nexthopDirs(); !slices.Equal(got, ecmpDirs) {
			lostAny = got
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("when_all_down keep, every real server refusing: every run found all failed after %.2f s; router after %.2f s more:\n%s",
		failedAt.Sub(start).Seconds(), annDetect.Seconds(), l.routes())
	if lostAny != nil {
		t.Errorf("when_all_down keep: the router's next hops went to %v while every real server was down; want all three", lostAny)
	}
	for _, d := range ecmpDirs {
		if _, _, ok := l.runs[d].seen("not announcing", from[d]); ok {
			t.Errorf("%s: run withdrew with when_all_down keep:\n%s", d, l.runs[d].text(start))
		}
	}
	l.clearRules()
	l.toAnnounce("withdraw")
	res.add("every real server refuses the port, on every director",
		fmt.Sprintf("when_all_down withdraw (the default): every director withdrew, the router had no route after %.1f s", gone.Seconds()),
		fmt.Sprintf("when_all_down keep: all three still announced %.0f s after every run found all failed", annDetect.Seconds()))
}

// settleChecks waits until every director's lvsctl run has every real
// server in service again after a burst of connection opens. Opening the
// long-lived connections saturates the lab VM's one emulated CPU (TestECMP
// reports 98 % busy and full backlog queues), and on a host shared with
// other work the checks' 1 s timeouts then run out on every director: each
// takes servers out at its own moment, their mh tables differ, and a flow
// that a withdrawal moves to another director meets another real server,
// which resets it. The scenario measures a withdrawal among healthy
// servers, so it starts only once the checks have had a whole detection
// time after the burst and every status shows them in service.
func (l *annLab) settleChecks(t *testing.T, from map[string]int) {
	t.Helper()
	time.Sleep(annDetect)
	start, rounds := time.Now(), 0
	for ; ; rounds++ {
		var notOK []string
		for _, d := range ecmpDirs {
			// Every server in service and the VIP announced; probes
			// reported late (exit 1 too) do not matter here.
			r := l.run(d, labtest.Ours("lvsctl"), "status", "--journal-dir", l.journals[d])
			if r.Code > 1 || strings.Contains(r.Stdout, "held out") || !strings.Contains(r.Stdout, "announced "+annVIPPrefix) ||
				strings.Contains(r.Stdout, "NOT announced") {
				notOK = append(notOK, fmt.Sprintf("%s (exit %d)", d, r.Code))
			}
		}
		if notOK == nil {
			break
		}
		if time.Since(start) > annBound {
			t.Fatalf("lvsctl status still holds a server out on %v %v after the connections opened (%s)", notOK, annBound, l.checkTrouble(from, nil, 0))
		}
		time.Sleep(500 * time.Millisecond)
	}
	if rounds > 0 {
		t.Logf("the checks settled %.1f s after the burst's detection time (%s)", time.Since(start).Seconds(), l.checkTrouble(from, nil, 0))
	}
}

// checkTrouble says which directors' checks took a real server out since
// the log indexes in from, and, given cpu0 (non-nil), how busy the VM's
// CPU was and how many packets its full backlog dropped since cpu0 and
// drops0 were read.
func (l *annLab) checkTrouble(from map[string]int, cpu0 []uint64, drops0 uint64) string {
	var parts []string
	for _, d := range ecmpDirs {
		n, i := 0, from[d]
		for {
			_, next, ok := l.runs[d].seen("up -> down", i)
			if !ok {
				break
			}
			n, i = n+1, next
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s's checks took out %d", d, n))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "no check failed on any director")
	}
	if cpu0 != nil {
		parts = append(parts, fmt.Sprintf("VM CPU %.0f %% busy, %d packets dropped by full backlog queues", 100*cpuBusy(cpu0, cpuTimes(l.t)), softnetDrops(l.t)-drops0))
	}
	return strings.Join(parts, "; ")
}

// joinLines writes each of v on a line of its own.
func joinLines[T fmt.Stringer](v []T) string {
	var b strings.Builder
	for _, x := range v {
		b.WriteString(x.String())
		b.WriteByte('\n')
	}
	return b.String()
}
