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

// The ECMP topology: clients behind a router that spreads the VIP's
// packets over three directors with a layer-4 hash, the route learnt by
// BGP (BIRD 2 on every box), and real servers (VS/DR) that answer the
// clients through the router. Every director has the same rules: mh with
// mh-port and sloppy_tcp, so any of them sends a flow to the same real
// server, whichever director saw its SYN.
//
//	client 10.1.0.10 ── front ── 10.1.0.1 router 10.2.0.1 ── core ──┬ dir1..3  10.2.0.11-13 (VIP on lo, BIRD announces VIP/32)
//	                                                                ├ rs1..5   10.2.0.21-25 (VIP on lo, arp_ignore/announce)
//	                                                                └ probe    10.2.0.9     (reaches the VIP through one chosen director)
const (
	ecmpVIP    = "10.3.0.1"
	ecmpPort   = "7000"
	ecmpClient = "10.1.0.10"
	ecmpRouter = "10.2.0.1"
	ecmpProbe  = "10.2.0.9"
	ecmpFlows  = 1000
	ecmpBase   = 20000 // source ports of the flows: below the ephemeral range
	ecmpAS     = 65000 // the router's
	ecmpDirAS  = 65001 // every director's
	// An unanswered line breaks its connection after this long (resets,
	// what a moved flow gets from the wrong server, count at once).
	ecmpTimeout = 10 * time.Second
	// Each connection sends a line every 0.5-1.5 s.
	ecmpInterval = time.Second
	// BGP hold time in the lab. Under TCG on a shared host the guest can
	// stall for seconds (BIRD logged 10 s event loops with 3 s), which
	// a 3 s hold takes for dead directors; the director-loss runs stop
	// BIRD cleanly, so the withdrawal does not wait for it.
	ecmpHold = 30
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
}

type birdProc struct {
	cmd  *exec.Cmd
	ctl  string
	log  string
	done chan error
}

func routerBird() string {
	var peers []BGPPeer
	for _, d := range ecmpDirs {
		peers = append(peers, BGPPeer{d, ecmpAddr[d]})
	}
	return RouterBird(ecmpRouter, ecmpAS, ecmpDirAS, peers, ecmpHold)
}

func directorBird(d string) string {
	return DirectorBird(ecmpAddr[d], ecmpDirAS, ecmpRouter, ecmpAS, ecmpVIP, ecmpHold)
}

// ecmpRules is the rule file every director should have: the service and
// the given real servers in that order.
func ecmpRules(sched string, servers ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "-A -t %s -s %s\n", ecmpVIPPort, sched)
	for _, s := range servers {
		fmt.Fprintf(&b, "-a -t %s -r %s:%s -g -w 1\n", ecmpVIPPort, ecmpAddr[s], ecmpPort)
	}
	return b.String()
}

const mhSched = "mh -b mh-port"

func newECMPLab(t *testing.T) *ecmpLab {
	hosts := append([]string{"client", "router", "probe", "rs5"}, append(slices.Clone(ecmpDirs), ecmpRSs...)...)
	l := &ecmpLab{network: newNetwork(t, "ecmp", hosts...), dir: t.TempDir(), bird: map[string]*birdProc{}}
	n := l.network
	n.bridge("front")
	n.bridge("core")
	n.plug("client", "eth0", "front", ecmpClient+"/24")
	n.queue("client", "route add default via 10.1.0.1")
	n.plug("router", "eth0", "front", "10.1.0.1/24")
	n.plug("router", "eth1", "core", ecmpRouter+"/24")
	n.plug("probe", "eth0", "core", ecmpProbe+"/24")
	for _, d := range ecmpDirs {
		n.plug(d, "eth0", "core", ecmpAddr[d]+"/24")
		n.queue(d, "address add "+ecmpVIP+"/32 dev lo")
		n.queue(d, "route add default via "+ecmpRouter)
	}
	for _, r := range append(slices.Clone(ecmpRSs), "rs5") {
		n.plug(r, "eth0", "core", ecmpAddr[r]+"/24")
		n.queue(r, "route add default via "+ecmpRouter)
	}
	n.build()
	t.Cleanup(l.stopBirds) // before the network goes
	n.setSysctl("router", "net/ipv4/ip_forward", "1")
	// The router hashes each packet's addresses and ports to pick a
	// director. Policy 1 (layer 4) would take a hash the packet already
	// carries: over veth that is the client socket's own random hash,
	// which TCP draws anew after a retransmission timeout, so a flow would
	// hop directors whenever the emulated VM falls behind (seen as resets
	// when one director had a fifth real server, and stale entries that
	// kept a drain waiting). A router's NIC hands over a hash of the
	// headers instead; policy 3 with these fields (source and destination
	// address, protocol, ports) computes that here.
	n.setSysctl("router", "net/ipv4/fib_multipath_hash_policy", "3")
	n.setSysctl("router", "net/ipv4/fib_multipath_hash_fields", "0x0037")
	for _, r := range append(slices.Clone(ecmpRSs), "rs5") {
		n.lvsprep(r, "realserver", "dr", "--vip", ecmpVIP, "--dev", "eth0")
		n.start(r, "flowd", r, ":"+ecmpPort)
	}
	// TODO(lvsprep ECMP profile): "lvsprep director ecmp" once merged; until
	// then the same settings by hand.
	for _, d := range ecmpDirs {
		l.sloppy(d, true)
		n.setSysctl(d, "net/ipv4/conf/all/arp_ignore", "1")
		n.setSysctl(d, "net/ipv4/conf/all/arp_announce", "2")
		l.apply(d, ecmpRules(mhSched, ecmpRSs...))
	}
	l.startBird("router", routerBird())
	for _, d := range ecmpDirs {
		l.startBird(d, directorBird(d))
	}
	l.waitNexthops(ecmpDirs...)
	return l
}

func (l *ecmpLab) sloppy(d string, on bool) {
	v := "0"
	if on {
		v = "1"
	}
	l.setSysctl(d, "net/ipv4/vs/sloppy_tcp", v)
}

// apply makes a director's rules exactly the file's.
// TODO(lvsctl): "lvsctl apply" once merged; until then clear and restore.
func (l *ecmpLab) apply(d, rules string) {
	l.t.Helper()
	l.ipvsadm(d, "-C")
	if r := l.runIn(d, rules, labtest.Ours("ipvsadm"), "-R"); r.Code != 0 {
		l.t.Fatalf("ipvsadm -R on %s: %s%s", d, r.Stdout, r.Stderr)
	}
}

// drift shows how director b's rules differ from a's, as lines of
// ipvsadm -Sn only one of them has.
// TODO(lvsctl): "lvsctl plan" against the other director's ipvsadm -Sn.
func (l *ecmpLab) drift(a, b string) []string {
	l.t.Helper()
	la := strings.Split(strings.TrimSpace(l.ipvsadm(a, "-Sn")), "\n")
	lb := strings.Split(strings.TrimSpace(l.ipvsadm(b, "-Sn")), "\n")
	var out []string
	for _, x := range lb {
		if !slices.Contains(la, x) {
			out = append(out, "+ "+x)
		}
	}
	for _, x := range la {
		if !slices.Contains(lb, x) {
			out = append(out, "- "+x)
		}
	}
	return out
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
	Ready struct {
		Ready       int            `json:"ready"`
		ByServer    map[string]int `json:"by_server"`
		OpenRetries int            `json:"open_retries"`
	}
}

// flows starts ecmpFlows connections from the client to the VIP, each
// ending after about lifetime (0: never).
func (l *ecmpLab) flows(lifetime time.Duration) *flowsProc {
	l.t.Helper()
	self, err := os.Executable()
	if err != nil {
		l.t.Fatal(err)
	}
	f := &flowsProc{t: l.t, lines: make(chan string, 16)}
	base := ecmpBase + 1000*(l.runs%12) // 20000-31999: below the ephemeral ports
	l.runs++
	f.cmd = exec.Command(self, ecmpVIPPort, itoa(ecmpFlows), itoa(base), ecmpInterval.String(), lifetime.String(), ecmpTimeout.String())
	f.cmd.Env = append(os.Environ(), RoleEnv+"=flows")
	f.cmd.Stderr = os.Stderr
	if f.in, err = f.cmd.StdinPipe(); err != nil {
		l.t.Fatal(err)
	}
	out, err := f.cmd.StdoutPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	l.in("client", func() { err = f.cmd.Start() })
	if err != nil {
		l.t.Fatal(err)
	}
	l.procs = append(l.procs, f.cmd) // killed with the network if the test stops early
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		close(f.lines)
	}()
	start := time.Now()
	f.read(&f.Ready, 180*time.Second)
	if f.Ready.Ready != ecmpFlows {
		l.t.Fatalf("flows: %+v", f.Ready)
	}
	l.t.Logf("%d connections open in %.1f s (%d first attempts failed and were retried): %s", ecmpFlows, time.Since(start).Seconds(), f.Ready.OpenRetries, sortedCounts(f.Ready.ByServer))
	return f
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

func (f *flowsProc) report() FlowReport {
	f.t.Helper()
	f.send("report")
	var r FlowReport
	f.read(&r, 30*time.Second)
	return r
}

// settle reports once no connection open at mark is still waiting for an
// answer (each has flowed again or broken), and at least min after mark.
func (f *flowsProc) settle(since time.Time, min time.Duration) FlowReport {
	f.t.Helper()
	deadline := since.Add(min + 2*ecmpTimeout)
	for {
		time.Sleep(500 * time.Millisecond)
		r := f.report()
		if (r.Pending == 0 && time.Since(since) >= min) || time.Now().After(deadline) {
			return r
		}
	}
}

func (f *flowsProc) quit() {
	f.t.Helper()
	f.send("quit")
	done := make(chan error, 1)
	go func() { done <- f.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			f.t.Errorf("flows client: %v", err)
		}
	case <-time.After(30 * time.Second):
		f.cmd.Process.Kill()
		f.t.Fatal("flows client did not quit")
	}
}

// lossRow is one director-loss run.
type lossRow struct {
	setup                  string
	atMark, broken, stuck  int
	recoveryMS, maxGapMS   int64
	baseRecMS, baseGapMS   int64
	busy                   float64 // the VM's CPU, share busy while the flows ran idle
	withdrawMS             int64
	reasons, brokenServers string
}

// directorLoss holds the flows, stops dir3's BIRD and then takes its link
// down, and counts the connections that break. dir3 comes back after.
func (l *ecmpLab) directorLoss(setup string, opened func()) lossRow {
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
	base := f.settle(time.Now(), 2*time.Second)
	row.busy = cpuBusy(cpu, cpuTimes(l.t))
	row.baseRecMS, row.baseGapMS = base.RecoveryMS, base.MaxGapMS
	if base.Broken != 0 || base.AtMark != ecmpFlows {
		l.t.Errorf("%s: before the loss %d of %d connections open, %d broke: %+v", setup, base.AtMark, ecmpFlows, base.Broken, base)
	}
	f.mark()
	start := time.Now()
	l.stopBird("dir3")
	l.must("dir3", ipCmd, "link", "set", "eth0", "down")
	row.withdrawMS = l.waitNexthops("dir1", "dir2").Sub(start).Milliseconds()
	r := f.settle(start, 3*time.Second)
	f.quit()
	row.atMark, row.broken, row.stuck = r.AtMark, r.Broken, r.Pending
	row.recoveryMS, row.maxGapMS = r.RecoveryMS, r.MaxGapMS
	row.reasons, row.brokenServers = sortedCounts(r.Reasons), sortedCounts(r.BrokenByServer)
	l.t.Logf("%s: %d of %d broken (%s; by real server %s), %d stuck, all flowing again %d ms after the loss (max gap %d ms), route withdrawn after %d ms; idle flows: %d ms, max gap %d ms, VM CPU %.0f %% busy; first error %q",
		setup, r.Broken, r.AtMark, row.reasons, row.brokenServers, r.Pending, r.RecoveryMS, r.MaxGapMS, row.withdrawMS, row.baseRecMS, row.baseGapMS, 100*row.busy, r.FirstError)
	// dir3 back for the next run.
	l.must("dir3", ipCmd, "link", "set", "eth0", "up")
	l.startBird("dir3", directorBird("dir3"))
	l.waitNexthops(ecmpDirs...)
	return row
}

// probeVia sends the probe's flows to the VIP through one director.
func (l *ecmpLab) probeVia(d string) ProbeResult {
	l.t.Helper()
	l.must("probe", ipCmd, "route", "replace", ecmpVIP+"/32", "via", ecmpAddr[d])
	var r ProbeResult
	start := time.Now()
	self, err := os.Executable()
	if err != nil {
		l.t.Fatal(err)
	}
	cmd := exec.Command(self, ecmpVIPPort, itoa(ecmpFlows), itoa(ecmpBase), ecmpTimeout.String())
	cmd.Env = append(os.Environ(), RoleEnv+"=probe")
	cmd.Stderr = os.Stderr
	var out []byte
	l.in("probe", func() {
		// Killed with the network should the test stop early.
		timer := time.AfterFunc(5*time.Minute, func() { cmd.Process.Kill() })
		out, err = cmd.Output()
		timer.Stop()
	})
	if err != nil {
		l.t.Fatalf("probe through %s: %v", d, err)
	}
	if err := json.Unmarshal(out, &r); err != nil {
		l.t.Fatalf("probe through %s: %v in %q", d, err, out)
	}
	l.t.Logf("probe through %s: %d flows in %.1f s", d, ecmpFlows, time.Since(start).Seconds())
	if r.Failed != 0 {
		l.t.Fatalf("probe through %s: %d of %d failed, first: %s", d, r.Failed, ecmpFlows, r.First)
	}
	return r
}

// activeConns reads a real server's ActiveConn on a director.
func (l *ecmpLab) activeConns(d, rs string) int {
	l.t.Helper()
	want := ecmpAddr[rs] + ":" + ecmpPort
	for _, line := range strings.Split(l.ipvsadm(d, "-Ln"), "\n") {
		f := strings.Fields(line)
		if len(f) == 6 && f[0] == "->" && f[1] == want {
			var n int
			fmt.Sscan(f[4], &n)
			return n
		}
	}
	return 0
}

// TestECMP proves the scale-out recipe with real traffic: three directors
// behind a BGP ECMP router, 1,000 long-lived connections, one boot.
func TestECMP(t *testing.T) {
	l := newECMPLab(t)
	started := time.Now()
	var losses []lossRow
	type figure struct{ scenario, result, control string }
	var figures []figure

	l.sub(t, "drift", func(t *testing.T) {
		// With the flows open, a fifth real server is added by hand on dir2
		// only.
		row := l.directorLoss("mh + sloppy_tcp, dir2 with a 5th real server", func() {
			l.ipvsadm("dir2", "-a", "-t", ecmpVIPPort, "-r", ecmpAddr["rs5"]+":"+ecmpPort, "-g", "-w", "1")
			d := l.drift("dir1", "dir2")
			t.Logf("dir2 against dir1 (ipvsadm -Sn):\n%s", strings.Join(d, "\n"))
			if len(d) != 1 || !strings.Contains(d[0], ecmpAddr["rs5"]) {
				t.Errorf("drift of dir2 against dir1: %q, want the fifth real server", d)
			}
		})
		losses = append(losses, row)
		if row.broken == 0 {
			t.Errorf("no connection broke with dir2 drifted: the drift control shows nothing")
		}
		l.apply("dir2", ecmpRules(mhSched, ecmpRSs...))
		if d := l.drift("dir1", "dir2"); len(d) != 0 {
			t.Errorf("after applying the file on dir2 it still differs from dir1: %q", d)
		}
		figures = append(figures, figure{"one director has a 5th real server (drift)",
			fmt.Sprintf("%d of %d broken (%.1f %%)", row.broken, row.atMark, pct(row.broken, row.atMark)), "after the fix: see the mh + sloppy_tcp row"})
	})

	l.sub(t, "director loss", func(t *testing.T) {
		row := l.directorLoss("mh + sloppy_tcp", nil)
		losses = append(losses, row)
		if row.broken != 0 || row.stuck != 0 || row.atMark != ecmpFlows {
			t.Errorf("mh + sloppy_tcp: %d of %d connections broke, %d stuck; want 0 of %d", row.broken, row.atMark, row.stuck, ecmpFlows)
		}
		for _, d := range ecmpDirs {
			l.apply(d, ecmpRules("wrr", ecmpRSs...))
		}
		losses = append(losses, l.directorLoss("wrr + sloppy_tcp (control)", nil))
		for _, d := range ecmpDirs {
			l.apply(d, ecmpRules(mhSched, ecmpRSs...))
			l.sloppy(d, false)
		}
		losses = append(losses, l.directorLoss("mh without sloppy_tcp (control)", nil))
		for _, d := range ecmpDirs {
			l.sloppy(d, true)
		}
		figures = append(figures, figure{"one of 3 directors stops (BIRD down, then link down)",
			fmt.Sprintf("%d of %d broken", row.broken, row.atMark),
			fmt.Sprintf("wrr: %d broken; no sloppy_tcp: %d broken", losses[len(losses)-2].broken, losses[len(losses)-1].broken)})
		figures = append(figures, figure{"time from the loss until all connections flow again",
			fmt.Sprintf("%.2f s (route withdrawn after %.2f s)", float64(row.recoveryMS)/1000, float64(row.withdrawMS)/1000),
			fmt.Sprintf("%.2f s with nothing lost (send interval)", float64(row.baseRecMS)/1000)})
	})

	l.sub(t, "real server leaves", func(t *testing.T) {
		// Drain: weight 0 everywhere, wait until no director has an
		// active connection to rs4 (sessions end by themselves here,
		// every 2-6 s), then delete it.
		// TODO(lvsctl): "lvsctl apply" of the file without rs4, with drain.
		f := l.flows(4 * time.Second)
		f.mark()
		start := time.Now()
		for _, d := range ecmpDirs {
			l.ipvsadm(d, "-e", "-t", ecmpVIPPort, "-r", ecmpAddr["rs4"]+":"+ecmpPort, "-g", "-w", "0")
		}
		// A drain gives up waiting after a bound, as drain tools do: an
		// entry whose connection a real server reset stays ESTABLISHED on
		// its director (it never sees the reset) for 15 minutes. Sessions
		// here last at most 6 s.
		deadline := time.Now().Add(20 * time.Second)
		active := 0
		for {
			active = 0
			for _, d := range ecmpDirs {
				active += l.activeConns(d, "rs4")
			}
			if active == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		drained := time.Since(start)
		t.Logf("drain: %d entries to rs4 still ESTABLISHED when it was deleted", active)
		for _, d := range ecmpDirs {
			l.ipvsadm(d, "-d", "-t", ecmpVIPPort, "-r", ecmpAddr["rs4"]+":"+ecmpPort)
		}
		drain := f.settle(start, drained+2*time.Second)
		f.quit()
		t.Logf("drain: %d of %d broken (%s), drained in %.1f s, %d sessions ended meanwhile, servers now %s",
			drain.Broken, drain.AtMark, sortedCounts(drain.Reasons), drained.Seconds(), drain.Ended, sortedCounts(drain.ByServer))
		if drain.Broken != 0 || drain.Pending != 0 {
			t.Errorf("drain of rs4: %d of %d broke, %d stuck; want 0", drain.Broken, drain.AtMark, drain.Pending)
		}
		if drain.ByServer["rs4"] != 0 {
			t.Errorf("connections on rs4 after it left: %v", drain.ByServer)
		}

		for _, d := range ecmpDirs {
			l.apply(d, ecmpRules(mhSched, ecmpRSs...))
		}
		f = l.flows(4 * time.Second)
		f.mark()
		start = time.Now()
		for _, d := range ecmpDirs {
			l.ipvsadm(d, "-d", "-t", ecmpVIPPort, "-r", ecmpAddr["rs4"]+":"+ecmpPort)
		}
		del := f.settle(start, 2*time.Second)
		f.quit()
		t.Logf("ipvsadm -d: %d of %d broken (%s; by real server %s)", del.Broken, del.AtMark, sortedCounts(del.Reasons), sortedCounts(del.BrokenByServer))
		if del.Broken == 0 {
			t.Errorf("ipvsadm -d of rs4 broke no connection: the control shows nothing")
		}
		for _, d := range ecmpDirs {
			l.apply(d, ecmpRules(mhSched, ecmpRSs...))
		}
		figures = append(figures, figure{"one of 4 real servers leaves with drain",
			fmt.Sprintf("%d of %d broken (drained in %.1f s)", drain.Broken, drain.AtMark, drained.Seconds()),
			fmt.Sprintf("ipvsadm -d: %d of %d broken", del.Broken, del.AtMark)})
	})

	l.sub(t, "flows moved", func(t *testing.T) {
		before := l.probeVia("dir1")
		l.ipvsadm("dir1", "-d", "-t", ecmpVIPPort, "-r", ecmpAddr["rs4"]+":"+ecmpPort)
		after := l.probeVia("dir1")
		moved, both := Moved(before, after)
		onRS4 := before.ByServer["rs4"]
		mod := ModuloMoved(ecmpProbe, ecmpFlows, ecmpBase, 4, 3)
		t.Logf("rs4 leaves: %d of %d flows moved (%.1f %%), %d of them had rs4; before %s, after %s; modulo hash: %d moved (%.1f %%)",
			moved, both, pct(moved, both), onRS4, sortedCounts(before.ByServer), sortedCounts(after.ByServer), mod, pct(mod, ecmpFlows))
		if moved < onRS4 || after.ByServer["rs4"] != 0 {
			t.Errorf("%d flows moved but %d were on rs4, rs4 still has %d", moved, onRS4, after.ByServer["rs4"])
		}
		l.apply("dir1", ecmpRules(mhSched, ecmpRSs...))
		figures = append(figures, figure{"flows moved to another real server when one of 4 leaves",
			fmt.Sprintf("%d of %d (%.1f %%; %d were on it)", moved, both, pct(moved, both), onRS4),
			fmt.Sprintf("modulo hash: %d of %d (%.1f %%)", mod, ecmpFlows, pct(mod, ecmpFlows))})
	})

	l.sub(t, "order", func(t *testing.T) {
		// The same four real servers, added by hand in different orders.
		l.ipvsadm("dir1", "-C")
		l.ipvsadm("dir2", "-C")
		for d, order := range map[string][]string{"dir1": {"rs1", "rs2", "rs3", "rs4"}, "dir2": {"rs4", "rs2", "rs1", "rs3"}} {
			l.ipvsadm(d, "-A", "-t", ecmpVIPPort, "-s", "mh", "-b", "mh-port")
			for _, rs := range order {
				l.ipvsadm(d, "-a", "-t", ecmpVIPPort, "-r", ecmpAddr[rs]+":"+ecmpPort, "-g", "-w", "1")
			}
		}
		mismatch, both := Moved(l.probeVia("dir1"), l.probeVia("dir2"))
		for _, d := range []string{"dir1", "dir2"} {
			l.apply(d, ecmpRules(mhSched, ecmpRSs...))
		}
		fixed, both2 := Moved(l.probeVia("dir1"), l.probeVia("dir2"))
		t.Logf("different orders: %d of %d flows reach different real servers through dir1 and dir2; after one file on both: %d of %d", mismatch, both, fixed, both2)
		if fixed != 0 {
			t.Errorf("after the same file on both directors %d of %d flows still differ", fixed, both2)
		}
		figures = append(figures, figure{"two directors, same servers added in different orders",
			fmt.Sprintf("one file applied on both: %d of %d mismatching", fixed, both2),
			fmt.Sprintf("by hand: %d of %d mismatching", mismatch, both)})
	})

	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "director loss (3 -> 2)\tbroken\tstuck\tall flowing again\tmax gap\troute withdrawn\tno loss: flowing / max gap / VM CPU\tbroken by reason")
	for _, r := range losses {
		fmt.Fprintf(w, "%s\t%d of %d\t%d\t%.2f s\t%.2f s\t%.2f s\t%.2f s / %.2f s / %.0f %%\t%s\n", r.setup, r.broken, r.atMark, r.stuck,
			float64(r.recoveryMS)/1000, float64(r.maxGapMS)/1000, float64(r.withdrawMS)/1000, float64(r.baseRecMS)/1000, float64(r.baseGapMS)/1000, 100*r.busy, r.reasons)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "scenario\tresult\tcontrol")
	for _, f := range figures {
		fmt.Fprintf(w, "%s\t%s\t%s\n", f.scenario, f.result, f.control)
	}
	w.Flush()
	t.Logf("ECMP, %d connections, %d directors, scenarios in %.0f s:\n%s", ecmpFlows, len(ecmpDirs), time.Since(started).Seconds(), b.String())
}

// cpuTimes reads the VM's CPU time counters (the "cpu" line of
// /proc/stat): user nice system idle iowait irq softirq steal.
func cpuTimes(t *testing.T) []uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var v []uint64
	for _, f := range strings.Fields(line)[1:] {
		var x uint64
		fmt.Sscan(f, &x)
		v = append(v, x)
	}
	return v
}

// cpuBusy is the share of CPU time not idle between two readings.
func cpuBusy(a, b []uint64) float64 {
	var total, idle uint64
	for i := range min(len(a), len(b), 8) {
		d := b[i] - a[i]
		total += d
		if i == 3 || i == 4 {
			idle += d
		}
	}
	if total == 0 {
		return 0
	}
	return float64(total-idle) / float64(total)
}

// sub runs a subtest with the lab's helpers failing that subtest, from the
// same start whatever the one before left: every director up, announced,
// with the file's mh rules and sloppy_tcp.
func (l *ecmpLab) sub(t *testing.T, name string, f func(t *testing.T)) {
	t.Run(name, func(st *testing.T) {
		l.t = st
		defer func() { l.t = t }()
		for _, d := range ecmpDirs {
			l.apply(d, ecmpRules(mhSched, ecmpRSs...))
			l.sloppy(d, true)
		}
		if _, ok := l.bird["dir3"]; !ok {
			l.must("dir3", ipCmd, "link", "set", "eth0", "up")
			l.startBird("dir3", directorBird("dir3"))
		}
		l.waitNexthops(ecmpDirs...)
		f(st)
	})
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}
