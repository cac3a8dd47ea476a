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
	"testing"
	"text/tabwriter"
	"time"

	"github.com/lvskit/lvskit/lab/labtest"
)

// The ECMP topology: a router that spreads the VIP's packets over three
// directors with a layer-4 hash, the route learnt by BGP (BIRD 2 on every
// box), and real servers (VS/DR) that answer the clients straight back.
// Every director is prepared with "lvsprep director ecmp" and gets its
// rules with "lvsctl apply" of one file: mh with mh-port and sloppy_tcp,
// so any of them sends a flow to the same real server, whichever
// director saw its SYN.
//
// The clients run on the router itself: the router's own connections go
// through the same multipath route and hash as forwarded ones, and the
// emulated VM (one CPU under TCG) is spared a segment and two veth hops
// per packet.
//
//	router 10.2.0.1 (clients) ── core ──┬ dir1..3  10.2.0.11-13 (VIP on lo, BIRD announces VIP/32)
//	                                    ├ rs1..5   10.2.0.21-25 (VIP on lo, arp_ignore/announce)
//	                                    └ probe    10.2.0.9     (reaches the VIP through one chosen director)
const (
	ecmpVIP    = "10.3.0.1"
	ecmpPort   = "7000"
	ecmpRouter = "10.2.0.1"
	ecmpProbe  = "10.2.0.9"
	ecmpFlows  = 1000
	ecmpBase   = 20000 // source ports of the flows: below the ephemeral range
	ecmpAS     = 65000 // the router's
	ecmpDirAS  = 65001 // every director's
	// Opening a connection and its first answer may take this long.
	ecmpOpenTimeout = 30 * time.Second
	// A UDP probe's wait for each answer (three tries a flow).
	ecmpUDPTimeout = 2 * time.Second
	// Source ports of the UDP probes: each director loss probes its own
	// 1,000 flows twice, so no entry of an earlier loss pins a flow.
	ecmpUDPBase = 20000
	// Each connection sends a line every 0.25-0.75 s.
	ecmpInterval = 500 * time.Millisecond
	// Sessions of the drain runs last 5-15 s, then their slot opens a new
	// one: a drain ends when the leaving server's sessions have ended.
	ecmpSession = 10 * time.Second
	// How long a scenario watches after its event: a connection that has
	// carried no data since by then is broken. Asserted rows usually end
	// much earlier, once every connection has flowed again; controls,
	// whose stalled connections never do, end after ecmpControlWatch.
	ecmpWatch        = 60 * time.Second
	ecmpControlWatch = 15 * time.Second
	// BGP hold time in the lab. Under TCG on a shared host the guest can
	// stall for seconds (BIRD logged 10 s event loops with 3 s), which
	// a 3 s hold takes for dead directors; the director-loss runs stop
	// BIRD cleanly, so the withdrawal does not wait for it.
	ecmpHold = 30
	// The VM's input backlog (net.core.netdev_max_backlog) during the test.
	ecmpBacklog = "20000"
)

var (
	ecmpVIPPort = ecmpVIP + ":" + ecmpPort
	ecmpDirs    = []string{"dir1", "dir2", "dir3"}
	ecmpRSs     = []string{"rs1", "rs2", "rs3", "rs4"}
	ecmpAddr    = map[string]string{
		"dir1": "10.2.0.11", "dir2": "10.2.0.12", "dir3": "10.2.0.13",
		"rs1": "10.2.0.21", "rs2": "10.2.0.22", "rs3": "10.2.0.23", "rs4": "10.2.0.24", "rs5": "10.2.0.25",
	}
)

// ecmpLab is the running topology.
type ecmpLab struct {
	*network
	dir  string // configs, control sockets, logs
	bird map[string]*birdProc
	// runs counts the flow client's runs: each starts from its own
	// 1,000 source ports, so no director still holds an entry for a flow
	// of an earlier run (one broken by a reset from a real server stays
	// ESTABLISHED on its director, and a SYN reusing it would follow it).
	runs int
	// openErrors sums the flow clients' failed opens by reason.
	openErrors map[string]int
	// udpRuns counts the UDP probes' port ranges, as runs does the flows'.
	udpRuns int
}

type birdProc struct {
	cmd  *exec.Cmd
	ctl  string
	log  string
	done chan error
}

func routerBird() string {
	var dirs []string
	for _, d := range ecmpDirs {
		dirs = append(dirs, ecmpAddr[d])
	}
	return routerBirdConfig(ecmpRouter, ecmpAS, ecmpDirAS, dirs, ecmpHold)
}

func directorBird(d string) string {
	return directorBirdConfig(ecmpAddr[d], ecmpDirAS, ecmpRouter, ecmpAS, ecmpVIP, ecmpHold)
}

// ecmpRules is the rule file every director should have: the service and
// the given real servers in that order.
func ecmpRules(sched string, servers ...string) string {
	var b strings.Builder
	for _, proto := range []string{"-t", "-u"} { // the same port over TCP and UDP
		fmt.Fprintf(&b, "-A %s %s -s %s\n", proto, ecmpVIPPort, sched)
		for _, s := range servers {
			fmt.Fprintf(&b, "-a %s %s -r %s:%s -g -w 1\n", proto, ecmpVIPPort, ecmpAddr[s], ecmpPort)
		}
	}
	return b.String()
}

const mhSched = "mh -b mh-port"

func newECMPLab(t *testing.T) *ecmpLab {
	hosts := append([]string{"router", "probe", "rs5"}, append(slices.Clone(ecmpDirs), ecmpRSs...)...)
	l := &ecmpLab{network: newNetwork(t, "ecmp", hosts...), dir: t.TempDir(), bird: map[string]*birdProc{}, openErrors: map[string]int{}}
	n := l.network
	n.bridge("core")
	n.plug("router", "eth0", "core", ecmpRouter+"/24")
	n.plug("probe", "eth0", "core", ecmpProbe+"/24")
	for _, d := range append(slices.Clone(ecmpDirs), append(slices.Clone(ecmpRSs), "rs5")...) {
		n.plug(d, "eth0", "core", ecmpAddr[d]+"/24")
		n.queue(d, "route add default via "+ecmpRouter)
	}
	n.build()
	t.Cleanup(l.stopBirds) // before the network goes
	// Every hop between namespaces queues the packet on the VM's one CPU
	// (veth hands it to netif_rx). The default backlog of 1,000 packets
	// overflowed under the flows (2,936 drops in one run): a dropped data
	// packet is sent again, a dropped reset is not, and a director that
	// missed a client's reset holds its entry ESTABLISHED for 15 minutes,
	// which can keep an lvsctl drain waiting until its deadline (one run
	// saw that; the entry was not traced). A real director's NIC has its
	// own queues; here the backlog stands in.
	const backlog = "net/core/netdev_max_backlog"
	old, err := os.ReadFile("/proc/sys/" + backlog)
	if err != nil {
		t.Fatal(err)
	}
	n.setSysctl("", backlog, ecmpBacklog)
	t.Cleanup(func() { os.WriteFile("/proc/sys/"+backlog, old, 0o644) })
	// The router hashes each packet's addresses and ports to pick a
	// director. Policy 1 (layer 4) would take a hash the packet already
	// carries: over veth that is the client socket's own random hash,
	// which TCP draws anew after a retransmission timeout, so a flow would
	// hop directors whenever the emulated VM falls behind. A router's NIC
	// hands over a hash of the headers instead; policy 3 with these fields
	// (source and destination address, protocol, ports) computes that here,
	// for forwarded packets and the router's own alike.
	n.setSysctl("router", "net/ipv4/fib_multipath_hash_policy", "3")
	n.setSysctl("router", "net/ipv4/fib_multipath_hash_fields", "0x0037")
	for _, r := range append(slices.Clone(ecmpRSs), "rs5") {
		n.lvsprep(r, "realserver", "dr", "--vip", ecmpVIP, "--dev", "eth0")
		n.start(r, "flowd", r, ":"+ecmpPort)
		// UDP answers come from the VIP (bound to it, on lo): a DR
		// reply from another address would not match the client's flow.
		n.start(r, "udpecho", r, ecmpVIPPort)
	}
	// Each director: the profile, the rules, a check of both, and only
	// then BIRD, so no SYN reaches a director before its service exists.
	for _, d := range ecmpDirs {
		n.lvsprep(d, "director", "ecmp", "--vip", ecmpVIP)
		l.apply(d, ecmpRules(mhSched, ecmpRSs...), 0)
		n.lvsprep(d, "check", "director", "ecmp", "--vip", ecmpVIP)
	}
	l.startBird("router", routerBird())
	for _, d := range ecmpDirs {
		l.startBird(d, directorBird(d))
	}
	l.waitNexthops(ecmpDirs...)
	return l
}

// sloppy sets sloppy_tcp by hand: only the control without it turns it
// off ("lvsprep director ecmp" turned it on).
func (l *ecmpLab) sloppy(d string, on bool) {
	v := "0"
	if on {
		v = "1"
	}
	l.setSysctl(d, "net/ipv4/vs/sloppy_tcp", v)
}

// apply makes a director's rules the file's with lvsctl apply; real
// servers that leave are drained for at most drain (0: deleted at once).
func (l *ecmpLab) apply(d, rules string, drain time.Duration) string {
	l.t.Helper()
	r := l.runIn(d, rules, labtest.Ours("lvsctl"), "apply", "--drain-timeout", drain.String(), "-")
	if r.Code != 0 {
		l.t.Fatalf("lvsctl apply on %s: exit %d\n%s%s", d, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// applyAll applies the file on every director.
func (l *ecmpLab) applyAll(rules string) {
	l.t.Helper()
	for _, d := range ecmpDirs {
		l.apply(d, rules, 0)
	}
}

// plan runs lvsctl plan of rules on a director: exit 0 in sync, 3 when it
// differs (the output lists how).
func (l *ecmpLab) plan(d, rules string) (int, string) {
	l.t.Helper()
	r := l.runIn(d, rules, labtest.Ours("lvsctl"), "plan", "-")
	if r.Code != 0 && r.Code != 3 {
		l.t.Fatalf("lvsctl plan on %s: exit %d\n%s%s", d, r.Code, r.Stdout, r.Stderr)
	}
	return r.Code, r.Stdout
}

// logConnTables logs every director's connection table, narrowed to the
// client ports of the broken connections (see logConnTable): on failure
// only.
func (l *ecmpLab) logConnTables(t *testing.T, ports []int) {
	t.Helper()
	if ports == nil {
		ports = []int{} // silent ones only: the counts, not 3,000 lines
	}
	for _, d := range ecmpDirs {
		l.logConnTable(t, d, ports)
	}
}

// expireNodest sets net.ipv4.vs.expire_nodest_conn on every director.
func (l *ecmpLab) expireNodest(v string) {
	for _, d := range ecmpDirs {
		l.setSysctl(d, "net/ipv4/vs/expire_nodest_conn", v)
	}
}

func (l *ecmpLab) startBird(host, conf string) {
	l.t.Helper()
	p := &birdProc{ctl: filepath.Join(l.dir, host+".ctl"), log: filepath.Join(l.dir, host+".log"), done: make(chan error, 1)}
	cf := filepath.Join(l.dir, host+".conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		l.t.Fatal(err)
	}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		l.t.Fatal(err)
	}
	defer logf.Close()
	p.cmd = exec.Command("/usr/sbin/bird", "-f", "-c", cf, "-s", p.ctl, "-P", filepath.Join(l.dir, host+".pid"))
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	l.in(host, func() { err = p.cmd.Start() })
	if err != nil {
		l.t.Fatalf("bird on %s: %v", host, err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	l.bird[host] = p
}

// birdc runs a BIRD client command on host.
func (l *ecmpLab) birdc(host string, args ...string) string {
	l.t.Helper()
	return l.must(host, "/usr/sbin/birdc", append([]string{"-s", l.bird[host].ctl}, args...)...)
}

// stopBird shuts host's BIRD down cleanly (its sessions end with a
// notification, so the router withdraws at once) and waits for it.
func (l *ecmpLab) stopBird(host string) {
	l.t.Helper()
	p := l.bird[host]
	l.birdc(host, "down")
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		l.t.Fatalf("bird on %s still running 20s after birdc down", host)
	}
	delete(l.bird, host)
}

func (l *ecmpLab) stopBirds() {
	for _, p := range l.bird {
		p.cmd.Process.Kill()
		<-p.done
	}
	if l.t.Failed() {
		logs, _ := filepath.Glob(filepath.Join(l.dir, "*.log"))
		for _, f := range logs {
			b, _ := os.ReadFile(f)
			l.t.Logf("%s:\n%s", filepath.Base(f), tail(string(b), 15))
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

var viaRE = regexp.MustCompile(`via (\S+)`)

// nexthops are the router's next hops for the VIP.
func (l *ecmpLab) nexthops() []string {
	l.t.Helper()
	out := l.must("router", ipCmd, "-4", "-o", "route", "show", ecmpVIP+"/32")
	var hops []string
	for _, m := range viaRE.FindAllStringSubmatch(out, -1) {
		hops = append(hops, m[1])
	}
	slices.Sort(hops)
	return hops
}

// waitNexthops waits until the router's route to the VIP goes exactly
// through the given directors, and returns when it saw that.
func (l *ecmpLab) waitNexthops(dirs ...string) time.Time {
	l.t.Helper()
	var want []string
	for _, d := range dirs {
		want = append(want, ecmpAddr[d])
	}
	slices.Sort(want)
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := l.nexthops()
		if slices.Equal(got, want) {
			return time.Now()
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("router's next hops for %s: %v, want %v\nbirdc show protocols:\n%s", ecmpVIP, got, want, l.birdc("router", "show", "protocols"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// flowsProc is the client process holding the long-lived connections.
type flowsProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	// openErrors is the lab's tally, added to at quit.
	openErrors map[string]int
	Ready      struct {
		Ready          int            `json:"ready"`
		ByServer       map[string]int `json:"by_server"`
		OpenErrors     map[string]int `json:"open_errors"`
		FirstOpenError string         `json:"first_open_error"`
	}
}

// flows starts ecmpFlows connections from the client to the VIP, each
// ending after about lifetime (0: never).
func (l *ecmpLab) flows(lifetime time.Duration) *flowsProc {
	l.t.Helper()
	return l.flowsEvery(lifetime, ecmpInterval)
}

// flowsEvery is flows with each connection sending a line every
// interval/2 to 3×interval/2.
func (l *ecmpLab) flowsEvery(lifetime, interval time.Duration) *flowsProc {
	l.t.Helper()
	f := &flowsProc{t: l.t, lines: make(chan string, 16), openErrors: l.openErrors}
	base := ecmpBase + 1000*(l.runs%12) // 20000-31999: below the ephemeral ports
	l.runs++
	f.cmd, f.in = l.client("flows", f.lines, ecmpVIPPort, itoa(ecmpFlows), itoa(base), interval.String(), lifetime.String(), ecmpOpenTimeout.String())
	start := time.Now()
	f.read(&f.Ready, 180*time.Second)
	if f.Ready.Ready != ecmpFlows {
		l.t.Fatalf("flows: %+v", f.Ready)
	}
	l.t.Logf("%d connections open in %.1f s: %s; failed attempts (retried): %s %s", ecmpFlows, time.Since(start).Seconds(), sortedCounts(f.Ready.ByServer), sortedCounts(f.Ready.OpenErrors), f.Ready.FirstOpenError)
	return f
}

// client starts this test binary as role on the router (where the
// clients are) with args: its stdin a pipe, its stdout's lines sent to
// lines (closed at its end); the network kills it if the test stops early.
func (l *ecmpLab) client(role string, lines chan<- string, args ...string) (*exec.Cmd, io.WriteCloser) {
	l.t.Helper()
	self, err := os.Executable()
	if err != nil {
		l.t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), RoleEnv+"="+role)
	cmd.Stderr = l.diag.writer("client " + role + ": ")
	in, err := cmd.StdinPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	l.in("router", func() { err = cmd.Start() })
	if err != nil {
		l.t.Fatal(err)
	}
	l.procs = append(l.procs, cmd)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return cmd, in
}

func (f *flowsProc) read(v any, timeout time.Duration) {
	f.t.Helper()
	select {
	case line, ok := <-f.lines:
		if !ok {
			f.cmd.Wait()
			f.t.Fatalf("flows client ended (%v)", f.cmd.ProcessState)
		}
		if err := json.Unmarshal([]byte(line), v); err != nil {
			f.t.Fatalf("flows client: %v in %q", err, line)
		}
	case <-time.After(timeout):
		f.cmd.Process.Kill()
		f.t.Fatalf("flows client: no answer in %v", timeout)
	}
}

func (f *flowsProc) send(cmd string) {
	f.t.Helper()
	if _, err := io.WriteString(f.in, cmd+"\n"); err != nil {
		f.t.Fatalf("flows client: %v", err)
	}
}

func (f *flowsProc) mark() {
	f.t.Helper()
	f.send("mark")
	var ok map[string]bool
	f.read(&ok, 30*time.Second)
}

// clock restarts the recovery clock (see FlowClient.Clock) and returns
// when: the connections count as flowing again only with a line sent
// after it answered.
func (f *flowsProc) clock() time.Time {
	f.t.Helper()
	f.send("clock")
	var ok map[string]bool
	f.read(&ok, 30*time.Second)
	return time.Now()
}

func (f *flowsProc) report() flowReport {
	f.t.Helper()
	f.send("report")
	var r flowReport
	f.read(&r, 30*time.Second)
	return r
}

// settle reports once every connection open at mark has flowed again
// since (or broken), and at least min after since; at the latest watch
// after since, when those still waiting count as broken.
func (f *flowsProc) settle(since time.Time, min, watch time.Duration) flowReport {
	f.t.Helper()
	for {
		time.Sleep(500 * time.Millisecond)
		r := f.report()
		if (r.Pending == 0 && time.Since(since) >= min) || time.Since(since) >= watch {
			return r
		}
	}
}

func (f *flowsProc) quit() {
	f.t.Helper()
	r := f.report()
	for reason, n := range r.OpenErrors {
		f.openErrors[reason] += n
	}
	if len(r.OpenErrors) > 0 {
		f.t.Logf("flows client: failed opens since its start: %s; first: %s", sortedCounts(r.OpenErrors), r.FirstOpenError)
	}
	f.send("quit")
	awaitQuit(f.t, f.cmd, "flows")
}

// awaitQuit waits for a client told to quit, killing it after 30 s.
func awaitQuit(t *testing.T, cmd *exec.Cmd, name string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s client: %v", name, err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%s client did not quit", name)
	}
}

// lossRow is one director-loss run.
type lossRow struct {
	setup string
	// broken counts connections reset or closed after the loss; silent
	// those that carried no data from the loss to the end of the watch.
	atMark, broken, silent int
	recoveryMS, maxGapMS   int64 // from the link down
	baseRecMS, baseGapMS   int64
	busy                   float64 // the VM's CPU, share busy while the flows ran with nothing lost
	withdrawMS, watchMS    int64   // from birdc down; from the link down
	reasons, brokenServers string
	// UDP flows probed before the loss and again once the route is
	// withdrawn: answered both times by different real servers, by the
	// same or different ones, unanswered after the loss.
	udpMoved, udpBoth, udpFailed int
}

func (r lossRow) lost() int { return r.broken + r.silent }

// directorLoss holds the flows, stops dir3's BIRD and then takes its link
// down, and counts the connections that break until every connection has
// flowed again (at most watch after the loss). dir3 comes back after.
func (l *ecmpLab) directorLoss(setup string, watch time.Duration, opened func()) lossRow {
	l.t.Helper()
	f := l.flows(0)
	if opened != nil {
		opened()
	}
	row := lossRow{setup: setup}
	// A look at the flows with nothing happening: the recovery time and
	// gaps the send interval alone gives.
	f.mark()
	cpu := cpuTimes(l.t)
	base := f.settle(time.Now(), 3*time.Second, ecmpWatch)
	row.busy = cpuBusy(cpu, cpuTimes(l.t))
	row.baseRecMS, row.baseGapMS = base.RecoveryMS, base.MaxGapMS
	if base.Broken != 0 || base.Pending != 0 || base.AtMark != ecmpFlows {
		l.logConnTables(l.t, base.BrokenPorts)
		l.t.Errorf("%s: before the loss %d of %d connections open, %d broke, %d silent: %+v", setup, base.AtMark, ecmpFlows, base.Broken, base.Pending, base)
	}
	// UDP flows have no connection to break: what a loss does to them is
	// whether the same flows reach the same real servers afterwards.
	udpBase := ecmpUDPBase + 1000*(l.udpRuns%12)
	l.udpRuns++
	udpBefore := l.probeUDP(udpBase)
	// Breaks count from the mark, before BIRD stops: the router's
	// withdrawal moves flows between the other directors too. dir3 still
	// forwards until its link goes down; recovery counts from then.
	f.mark()
	stop := time.Now()
	l.stopBird("dir3")
	l.must("dir3", ipCmd, "link", "set", "eth0", "down")
	start := f.clock()
	row.withdrawMS = l.waitNexthops("dir1", "dir2").Sub(stop).Milliseconds()
	r := f.settle(start, 3*time.Second, watch)
	row.watchMS = time.Since(start).Milliseconds()
	f.quit()
	row.atMark, row.broken, row.silent = r.AtMark, r.Broken, r.Pending
	row.recoveryMS, row.maxGapMS = r.RecoveryMS, r.MaxGapMS
	row.reasons, row.brokenServers = sortedCounts(r.Reasons), sortedCounts(r.BrokenByServer)
	udpAfter := l.probeUDP(udpBase)
	row.udpMoved, row.udpBoth = movedFlows(udpBefore, udpAfter)
	row.udpFailed = udpAfter.Failed
	l.t.Logf("%s: UDP: %d of %d flows answered by another real server after the loss, %d unanswered (first: %s); before: %d unanswered, %s",
		setup, row.udpMoved, row.udpBoth, udpAfter.Failed, udpAfter.First, udpBefore.Failed, sortedCounts(udpBefore.ByServer))
	l.t.Logf("%s: %d of %d broken (%s; by real server %s), %d silent until the end (%.1f s after the link went down), all flowing again %d ms after the link went down (max gap %d ms), route withdrawn %d ms after birdc down; nothing lost: %d ms, max gap %d ms, VM CPU %.0f %% busy; first error %q",
		setup, r.Broken, r.AtMark, row.reasons, row.brokenServers, r.Pending, float64(row.watchMS)/1000, r.RecoveryMS, r.MaxGapMS, row.withdrawMS, row.baseRecMS, row.baseGapMS, 100*row.busy, r.FirstError)
	l.dir3Back()
	return row
}

// dir3Back brings dir3's link, default route and BIRD back, and waits
// until the router uses it again.
func (l *ecmpLab) dir3Back() {
	l.t.Helper()
	l.must("dir3", ipCmd, "link", "set", "eth0", "up")
	l.must("dir3", ipCmd, "route", "replace", "default", "via", ecmpRouter)
	l.startBird("dir3", directorBird("dir3"))
	l.waitNexthops(ecmpDirs...)
}

// probeVia sends the probe's flows to the VIP through one director.
func (l *ecmpLab) probeVia(d string) probeResult {
	l.t.Helper()
	l.must("probe", ipCmd, "route", "replace", ecmpVIP+"/32", "via", ecmpAddr[d])
	r := l.runProbe("probe", "probe", ecmpBase, ecmpOpenTimeout)
	if r.Failed != 0 {
		l.t.Fatalf("probe through %s: %d of %d failed, first: %s", d, r.Failed, ecmpFlows, r.First)
	}
	return r
}

// probeUDP sends a datagram on each of ecmpFlows UDP flows from the
// router (where the clients are) through its ECMP route, from source
// ports base.., and says which real server answered each.
func (l *ecmpLab) probeUDP(base int) probeResult {
	l.t.Helper()
	return l.runProbe("router", "uprobe", base, ecmpUDPTimeout)
}

// runProbe runs a probe role (probe or uprobe) in host's namespace, each
// flow waiting at most timeout for its answer.
func (l *ecmpLab) runProbe(host, role string, base int, timeout time.Duration) probeResult {
	l.t.Helper()
	var r probeResult
	start := time.Now()
	self, err := os.Executable()
	if err != nil {
		l.t.Fatal(err)
	}
	cmd := exec.Command(self, ecmpVIPPort, itoa(ecmpFlows), itoa(base), timeout.String())
	cmd.Env = append(os.Environ(), RoleEnv+"="+role)
	cmd.Stderr = l.diag.writer(host + " " + role + ": ")
	var out []byte
	l.in(host, func() {
		// Killed with the network should the test stop early.
		timer := time.AfterFunc(5*time.Minute, func() { cmd.Process.Kill() })
		out, err = cmd.Output()
		timer.Stop()
	})
	if err != nil {
		l.t.Fatalf("%s from %s: %v", role, host, err)
	}
	if err := json.Unmarshal(out, &r); err != nil {
		l.t.Fatalf("%s from %s: %v in %q", role, host, err, out)
	}
	l.t.Logf("%s from %s: %d flows in %.1f s", role, host, ecmpFlows, time.Since(start).Seconds())
	return r
}

// drainRow is one way a real server leaves while the flows run.
type drainRow struct {
	how                    string
	atMark, broken, silent int
	onRS4                  int           // connections on rs4 just before the mark
	took                   time.Duration // until the server was gone from every director
	reasons                string
}

// TestECMP proves the scale-out recipe with real traffic: three directors
// behind a BGP ECMP router, 1,000 long-lived connections, one boot. The
// scenarios that leave stale connection entries on the directors (flows
// broken by a real server's reset, which a DR director never sees) come
// last, so no drain waits for them.
func TestECMP(t *testing.T) {
	l := newECMPLab(t)
	started := time.Now()
	cpu0, drops0 := cpuTimes(t), softnetDrops(t)
	full := ecmpRules(mhSched, ecmpRSs...)
	var res ecmpResults
	l.sub(t, "real server leaves", func(t *testing.T) { l.realServerLeaves(t, &res, full) })
	l.sub(t, "order and flows moved", func(t *testing.T) { l.orderAndFlowsMoved(t, &res, full) })
	l.sub(t, "drift then director loss", func(t *testing.T) { l.driftThenDirectorLoss(t, &res, full) })
	l.sub(t, "health checks", func(t *testing.T) { l.healthChecks(t, &res) })

	t.Logf("ECMP, %d connections (a line every %v-%v each), %d directors, scenarios in %.0f s (VM CPU %.0f %% busy, %d packets dropped by full backlog queues, failed opens by reason: %q):\n%s", ecmpFlows, ecmpInterval/2, ecmpInterval*3/2, len(ecmpDirs),
		time.Since(started).Seconds(), 100*cpuBusy(cpu0, cpuTimes(t)), softnetDrops(t)-drops0, sortedCounts(l.openErrors), res.tables())
}

// ecmpResults collects what TestECMP's scenarios measured, for its report.
type ecmpResults struct {
	losses  []lossRow
	drains  []drainRow
	figures []ecmpFigure
}

// ecmpFigure is one line of the report's summary: a scenario, lvskit's
// result and the control's.
type ecmpFigure struct{ scenario, result, control string }

// realServerLeaves has rs4 leave through lvsctl apply on every director
// at once, each draining its own connections to it, with the flows
// running; the controls delete rs4 at once with ipvsadm -d.
func (l *ecmpLab) realServerLeaves(t *testing.T, res *ecmpResults, full string) {
	f := l.flows(ecmpSession)
	without := ecmpRules(mhSched, "rs1", "rs2", "rs3")
	// lvsctl apply of the file without rs4 on every director at once,
	// each draining its own connections to rs4.
	// Right after the start many slots are between two sessions (their
	// new connections wait behind the first ones): wait until nearly
	// every slot holds one.
	deadline := time.Now().Add(30 * time.Second)
	for openNow(f.report()) < ecmpFlows*99/100 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}
	onRS4 := f.report().ByServer["rs4"]
	f.mark()
	start := time.Now()
	var bgs []*bgLvsctl
	for _, d := range ecmpDirs {
		bgs = append(bgs, l.lvsctlStart(d, without, "apply", "--drain-timeout", "60s", "-"))
	}
	for i, bg := range bgs {
		code, out := bg.wait(t, 90*time.Second)
		t.Logf("lvsctl apply on %s (exit %d):\n%s", ecmpDirs[i], code, strings.Join(out, "\n"))
		if code != 0 || !strings.Contains(strings.Join(out, "\n"), "drain-done") {
			t.Errorf("lvsctl apply on %s: exit %d, no drain-done", ecmpDirs[i], code)
		}
	}
	if t.Failed() {
		// What kept a drain waiting: the director's entries to rs4, and
		// whether the client still has those connections.
		for _, d := range ecmpDirs {
			var est []string
			for _, line := range strings.Split(l.ipvsadm(d, "-Lnc"), "\n") {
				if strings.Contains(line, "ESTABLISHED") && strings.Contains(line, ecmpAddr["rs4"]) {
					est = append(est, line)
				}
			}
			t.Logf("%s: entries to rs4 still ESTABLISHED:\n%s", d, strings.Join(est, "\n"))
		}
		ss := l.must("router", "/usr/bin/ss", "-tn", "state", "established", "dst", ecmpVIP)
		t.Logf("router: %d connections established to the VIP; ss -tn:\n%s", strings.Count(ss, "\n")-1, tail(ss, 10))
	}
	took := time.Since(start)
	// Every connection must flow again after the last change.
	r := f.settle(f.clock(), 3*time.Second, ecmpWatch)
	res.drains = append(res.drains, drainRow{"lvsctl apply (drain)", r.AtMark, r.Broken, r.Pending, onRS4, took, sortedCounts(r.Reasons)})
	t.Logf("lvsctl drain: %d of %d broken (%s), %d silent; %d sessions ended, %d opened, %d opens failed (%s)", r.Broken, r.AtMark, sortedCounts(r.Reasons), r.Pending, r.Ended, r.Opened, r.OpenFailed, sortedCounts(r.OpenErrors))
	if r.Broken != 0 || r.Pending != 0 || r.AtMark == 0 {
		l.logConnTables(t, r.BrokenPorts)
		t.Errorf("lvsctl drain of rs4: %d of %d broke, %d silent; want 0: %+v", r.Broken, r.AtMark, r.Pending, r)
	}
	if n := f.report().ByServer["rs4"]; n != 0 {
		t.Errorf("%d connections on rs4 after it left", n)
	}
	for _, d := range ecmpDirs {
		if code, out := l.plan(d, without); code != 0 {
			t.Errorf("lvsctl plan on %s after the drain: exit %d\n%s", d, code, out)
		}
	}
	// The controls: rs4 back, then deleted at once on every director
	// with ipvsadm -d, with net.ipv4.vs.expire_nodest_conn 0 (the
	// kernel's default) and 1.
	for _, expire := range []string{"0", "1"} {
		l.applyAll(full)
		deadline := time.Now().Add(2 * ecmpSession)
		for f.report().ByServer["rs4"] < ecmpFlows/8 && time.Now().Before(deadline) {
			time.Sleep(time.Second)
		}
		l.expireNodest(expire)
		onRS4 := f.report().ByServer["rs4"]
		f.mark()
		start := time.Now()
		for _, d := range ecmpDirs {
			l.ipvsadm(d, "-d", "-t", ecmpVIPPort, "-r", ecmpAddr["rs4"]+":"+ecmpPort)
		}
		took := time.Since(start)
		r := f.settle(f.clock(), 3*time.Second, ecmpControlWatch)
		res.drains = append(res.drains, drainRow{"ipvsadm -d, expire_nodest_conn=" + expire + " (control)", r.AtMark, r.Broken, r.Pending, onRS4, took, sortedCounts(r.Reasons)})
		t.Logf("ipvsadm -d, expire_nodest_conn=%s: %d of %d broken (%s; by real server %s), %d silent until the end; first error %q",
			expire, r.Broken, r.AtMark, sortedCounts(r.Reasons), sortedCounts(r.BrokenByServer), r.Pending, r.FirstError)
	}
	l.expireNodest("0")
	f.quit()
	d := res.drains[0]
	res.figures = append(res.figures, ecmpFigure{"one of 4 real servers leaves through lvsctl apply with drain",
		fmt.Sprintf("%d of %d broken (gone from all directors after %.1f s)", d.broken+d.silent, d.atMark, d.took.Seconds()),
		fmt.Sprintf("ipvsadm -d: %d of %d broken (expire_nodest_conn=0), %d of %d (=1)",
			res.drains[1].broken+res.drains[1].silent, res.drains[1].atMark, res.drains[2].broken+res.drains[2].silent, res.drains[2].atMark)})
}

// orderAndFlowsMoved compares the mh choices of two directors whose real
// servers were added in different orders, before and after lvsctl apply
// of one file, then counts the flows that move when one of 4 leaves.
func (l *ecmpLab) orderAndFlowsMoved(t *testing.T, res *ecmpResults, full string) {
	// The same four real servers, added by hand in different orders.
	for d, order := range map[string][]string{"dir1": {"rs1", "rs2", "rs3", "rs4"}, "dir2": {"rs4", "rs2", "rs1", "rs3"}} {
		l.ipvsadm(d, "-C")
		l.ipvsadm(d, "-A", "-t", ecmpVIPPort, "-s", "mh", "-b", "mh-port")
		for _, rs := range order {
			l.ipvsadm(d, "-a", "-t", ecmpVIPPort, "-r", ecmpAddr[rs]+":"+ecmpPort, "-g", "-w", "1")
		}
	}
	mismatch, both := movedFlows(l.probeVia("dir1"), l.probeVia("dir2"))
	for _, d := range []string{"dir1", "dir2"} {
		t.Logf("lvsctl apply on %s:\n%s", d, l.apply(d, full, 0))
	}
	via1 := l.probeVia("dir1")
	fixed, both2 := movedFlows(via1, l.probeVia("dir2"))
	t.Logf("different orders: %d of %d flows reach different real servers through dir1 and dir2; after lvsctl apply of one file on both: %d of %d", mismatch, both, fixed, both2)
	if fixed != 0 || both2 != ecmpFlows {
		t.Errorf("after lvsctl apply of one file on both directors %d of %d flows differ, want 0 of %d", fixed, both2, ecmpFlows)
	}
	res.figures = append(res.figures, ecmpFigure{"two directors, same servers added in different orders",
		fmt.Sprintf("lvsctl apply of one file on both: %d of %d mismatching", fixed, both2),
		fmt.Sprintf("by hand: %d of %d mismatching", mismatch, both)})

	// One of 4 real servers leaves dir1 through lvsctl apply: the flows
	// that reach another server now, against the probe just made.
	before := via1
	l.apply("dir1", ecmpRules(mhSched, "rs1", "rs2", "rs3"), 0)
	after := l.probeVia("dir1")
	moved, both := movedFlows(before, after)
	onRS4 := before.ByServer["rs4"]
	mod := moduloMoved(ecmpProbe, ecmpFlows, ecmpBase, 4, 3)
	t.Logf("rs4 leaves: %d of %d flows moved (%.1f %%), %d of them had rs4; before %s, after %s; modulo hash: %d moved (%.1f %%)",
		moved, both, pct(moved, both), onRS4, sortedCounts(before.ByServer), sortedCounts(after.ByServer), mod, pct(mod, ecmpFlows))
	if moved < onRS4 || after.ByServer["rs4"] != 0 {
		t.Errorf("%d flows moved but %d were on rs4, rs4 still has %d", moved, onRS4, after.ByServer["rs4"])
	}
	res.figures = append(res.figures, ecmpFigure{"flows moved to another real server when one of 4 leaves (lvsctl apply)",
		fmt.Sprintf("%d of %d (%.1f %%; %d were on it)", moved, both, pct(moved, both), onRS4),
		fmt.Sprintf("modulo hash: %d of %d (%.1f %%)", mod, ecmpFlows, pct(mod, ecmpFlows))})
}

// driftThenDirectorLoss stops dir3 with the flows running (directorLoss),
// first with a 5th real server on dir2 only (drift, which lvsctl plan
// shows), then with the drift fixed by lvsctl apply, then in the wrr and
// no-sloppy_tcp controls.
func (l *ecmpLab) driftThenDirectorLoss(t *testing.T, res *ecmpResults, full string) {
	// With the flows open, a fifth real server is added by hand on dir2
	// only; lvsctl plan of dir1's rules shows it on dir2.
	drift := l.directorLoss("mh + sloppy_tcp, dir2 with a 5th real server (drift)", ecmpControlWatch, func() {
		l.ipvsadm("dir2", "-a", "-t", ecmpVIPPort, "-r", ecmpAddr["rs5"]+":"+ecmpPort, "-g", "-w", "1")
		code, out := l.plan("dir2", l.ipvsadm("dir1", "-Sn"))
		t.Logf("lvsctl plan on dir2 of dir1's ipvsadm -Sn (exit %d):\n%s", code, out)
		if code != 3 || !strings.Contains(out, ecmpAddr["rs5"]) {
			t.Errorf("lvsctl plan on dir2 against dir1: exit %d, want 3 naming %s", code, ecmpAddr["rs5"])
		}
	})
	res.losses = append(res.losses, drift)
	// The fix: the file applied on dir2, which plan then finds in sync
	// with dir1; the next loss runs on the fixed directors.
	t.Logf("lvsctl apply on dir2:\n%s", l.apply("dir2", full, 0))
	if code, out := l.plan("dir2", l.ipvsadm("dir1", "-Sn")); code != 0 {
		t.Errorf("lvsctl plan on dir2 against dir1 after the fix: exit %d\n%s", code, out)
	}
	row := l.directorLoss("mh + sloppy_tcp (drift fixed by lvsctl apply)", ecmpWatch, nil)
	res.losses = append(res.losses, row)
	if row.lost() != 0 || row.atMark != ecmpFlows {
		t.Errorf("mh + sloppy_tcp: %d of %d connections broke, %d silent; want 0 of %d", row.broken, row.atMark, row.silent, ecmpFlows)
	}
	if row.udpMoved != 0 || row.udpFailed != 0 || row.udpBoth != ecmpFlows {
		t.Errorf("mh: %d of %d UDP flows moved to another real server, %d unanswered; want 0 of %d", row.udpMoved, row.udpBoth, row.udpFailed, ecmpFlows)
	}
	l.applyAll(ecmpRules("wrr", ecmpRSs...))
	res.losses = append(res.losses, l.directorLoss("wrr + sloppy_tcp (control)", ecmpControlWatch, nil))
	l.applyAll(full)
	for _, d := range ecmpDirs {
		l.sloppy(d, false)
	}
	res.losses = append(res.losses, l.directorLoss("mh without sloppy_tcp (control)", ecmpControlWatch, nil))
	for _, d := range ecmpDirs {
		l.sloppy(d, true)
	}
	res.figures = append(res.figures, ecmpFigure{"one of 3 directors stops (BIRD down, then link down)",
		fmt.Sprintf("%d of %d broken", row.lost(), row.atMark),
		fmt.Sprintf("wrr: %d of %d broken; no sloppy_tcp: %d of %d broken", res.losses[2].lost(), res.losses[2].atMark, res.losses[3].lost(), res.losses[3].atMark)})
	res.figures = append(res.figures, ecmpFigure{"UDP flows across the director loss (mh)",
		fmt.Sprintf("%d of %d answered by another real server, %d unanswered", row.udpMoved, row.udpBoth, row.udpFailed),
		fmt.Sprintf("wrr: %d of %d moved, %d unanswered", res.losses[2].udpMoved, res.losses[2].udpBoth, res.losses[2].udpFailed)})
	res.figures = append(res.figures, ecmpFigure{"time from the loss until all connections flow again",
		fmt.Sprintf("%.2f s (route withdrawn after %.2f s, longest stall %.2f s)", float64(row.recoveryMS)/1000, float64(row.withdrawMS)/1000, float64(row.maxGapMS)/1000),
		fmt.Sprintf("%.2f s with nothing lost (send interval; longest gap %.2f s)", float64(row.baseRecMS)/1000, float64(row.baseGapMS)/1000)})
	res.figures = append(res.figures, ecmpFigure{"one director has a 5th real server (drift)",
		fmt.Sprintf("after lvsctl plan showed it and lvsctl apply fixed it: %d of %d broken", row.lost(), row.atMark),
		fmt.Sprintf("drifted: %d of %d broken (%.1f %%)", drift.lost(), drift.atMark, pct(drift.lost(), drift.atMark))})
}

// tables formats what the scenarios measured as TestECMP reports it: the
// director losses, the ways rs4 left, and the summary of figures.
func (res *ecmpResults) tables() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "director loss (3 -> 2)\tbroken\tof which silent\tby reason\tall flowing again\tlongest stall\troute withdrawn\twatched\tnothing lost: flowing / longest gap / VM CPU\tUDP flows: other real server / unanswered")
	for _, r := range res.losses {
		fmt.Fprintf(w, "%s\t%d of %d\t%d\t%s\t%.2f s\t%.2f s\t%.2f s\t%.1f s\t%.2f s / %.2f s / %.0f %%\t%d of %d / %d\n", r.setup, r.lost(), r.atMark, r.silent, r.reasons,
			float64(r.recoveryMS)/1000, float64(r.maxGapMS)/1000, float64(r.withdrawMS)/1000, float64(r.watchMS)/1000, float64(r.baseRecMS)/1000, float64(r.baseGapMS)/1000, 100*r.busy,
			r.udpMoved, r.udpBoth, r.udpFailed)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "real server rs4 leaves\tbroken\tof which silent\tby reason\ton rs4 at the start\tgone after")
	for _, d := range res.drains {
		fmt.Fprintf(w, "%s\t%d of %d\t%d\t%s\t%d\t%.1f s\n", d.how, d.broken+d.silent, d.atMark, d.silent, d.reasons, d.onRS4, d.took.Seconds())
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "scenario\tresult\tcontrol")
	for _, f := range res.figures {
		fmt.Fprintf(w, "%s\t%s\t%s\n", f.scenario, f.result, f.control)
	}
	w.Flush()
	return b.String()
}

// cpuTimes reads the VM's CPU time counters (the "cpu" line of
// /proc/stat): user nice system idle iowait irq softirq steal.
func cpuTimes(t *testing.T) []uint64 {
	t.Helper()
	c, err := readVMCounters()
	if err != nil {
		t.Fatal(err)
	}
	return c.cpu
}

// softnetDrops is readSoftnetDrops, failing t on an error.
func softnetDrops(t *testing.T) uint64 {
	t.Helper()
	n, err := readSoftnetDrops()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// cpuBusy is the share of CPU time not idle between two readings.
func cpuBusy(a, b []uint64) float64 {
	return float64(vmCounters{cpu: a}.second(vmCounters{cpu: b}, time.Time{}).Busy) / 100
}

// sub runs a subtest with the lab's helpers failing that subtest, from the
// same start whatever the one before left: every director up, announced,
// with the file's mh rules (lvsctl apply) and sloppy_tcp.
func (l *ecmpLab) sub(t *testing.T, name string, f func(t *testing.T)) {
	t.Run(name, func(st *testing.T) {
		l.t = st
		defer func() { l.t = t }()
		for _, d := range ecmpDirs {
			l.apply(d, ecmpRules(mhSched, ecmpRSs...), 0)
			l.sloppy(d, true)
		}
		l.expireNodest("0")
		if _, ok := l.bird["dir3"]; !ok {
			l.dir3Back()
		}
		l.waitNexthops(ecmpDirs...)
		f(st)
	})
}

// openNow counts the connections a report saw open.
func openNow(r flowReport) int {
	n := 0
	for _, c := range r.ByServer {
		n += c
	}
	return n
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}
