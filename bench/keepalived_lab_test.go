//go:build lab

package bench

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/bench/benchdata"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/lab/labtest"
)

// The side-by-side with keepalived: the same virtual services and real
// servers, loaded by Debian's keepalived 2.2.7 (checker only) in one
// namespace and by lvsctl run in another, both checking every real server
// over TCP. Every real server address lives in one server namespace
// (a local route of a /16 on lo: one listener answers them all), so both
// checkers probe the same targets; the failed ones are on a port nothing
// listens on, which refuses at once.
//
//	ka   (keepalived)  192.168.71.1 ─┐
//	run  (lvsctl run)  192.168.72.1 ─┼─ srv: 10.200.0.0/16 local on lo, :80
//	apply (lvsctl apply) 192.168.73.1┘
//
// kaServices is the number of virtual services: 1,000 at full size
// (make bench-keepalived), 20 in a whole-lab run (keepalived alone takes
// most of an hour to start and reload 10,000 real servers under TCG).
// kaSteady is how long each checker's steady cost is measured.
var (
	kaServices = 1000
	kaSteady   = 60 * time.Second
	kaInterval = 20 * time.Second
)

const (
	kaPerSvc    = 10
	kaFailEvery = 100 // every 100th real server fails: 100 of 10,000
	kaTimeout   = time.Second
)

var kaSides = []string{"ka", "run", "apply"}

func kaVIP(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 100, byte(i / 250), byte(i%250 + 1)})
}

func kaRS(k int) netip.Addr { return netip.AddrFrom4([4]byte{10, 200, byte(k / 250), byte(k%250 + 1)}) }

// kaPort is real server k's port: 81 (refused) for the failed ones.
func kaPort(k int) int {
	if k%kaFailEvery == kaFailEvery/2 {
		return 81
	}
	return 80
}

// kaTable is one version of the configuration: the reload changes the
// weight of real server 1 and adds real server kaAdded to service 1.
type kaTable struct{ reloaded bool }

// kaAdded is the index of the real server the reload adds.
func kaAdded() int { return kaServices * kaPerSvc }

func (c kaTable) servers(i int) []int {
	var ks []int
	for j := range kaPerSvc {
		ks = append(ks, i*kaPerSvc+j)
	}
	if c.reloaded && i == 1 {
		ks = append(ks, kaAdded())
	}
	return ks
}

func (c kaTable) weight(k int) int {
	if c.reloaded && k == 1 {
		return 5
	}
	return 1
}

func (c kaTable) keepalivedConf() string {
	var b strings.Builder
	b.WriteString("global_defs {\n    router_id bench\n}\n")
	for i := range kaServices {
		fmt.Fprintf(&b, "virtual_server %s 80 {\n    delay_loop %d\n    lb_algo wrr\n    lb_kind NAT\n    protocol TCP\n", kaVIP(i), int(kaInterval.Seconds()))
		for _, k := range c.servers(i) {
			fmt.Fprintf(&b, "    real_server %s %d {\n        weight %d\n        inhibit_on_failure\n        TCP_CHECK {\n            connect_timeout %d\n        }\n    }\n",
				kaRS(k), kaPort(k), c.weight(k), int(kaTimeout.Seconds()))
		}
		b.WriteString("}\n")
	}
	return b.String()
}

func (c kaTable) yaml() string {
	var b strings.Builder
	b.WriteString("version: 2\nservices:\n")
	for i := range kaServices {
		fmt.Fprintf(&b, "  - {protocol: tcp, address: %s, port: 80, scheduler: wrr,\n     check: {type: tcp, interval: %s, timeout: %s},\n     destinations: [\n", kaVIP(i), kaInterval, kaTimeout)
		for _, k := range c.servers(i) {
			fmt.Fprintf(&b, "       {address: %s, port: %d, method: masq, weight: %d},\n", kaRS(k), kaPort(k), c.weight(k))
		}
		b.WriteString("     ]}\n")
	}
	return b.String()
}

// kaLab is the namespaces and the server's probe counts.
type kaLab struct {
	t    *testing.T
	dir  string
	ipvs map[string]*ipvs.Conn
	srv  *probeCounter
}

func newKALab(t *testing.T) *kaLab {
	l := &kaLab{t: t, dir: t.TempDir(), ipvs: map[string]*ipvs.Conn{}}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	names := append([]string{"srv"}, kaSides...)
	for _, n := range names {
		exec.Command("ip", "netns", "del", "kab-"+n).Run()
		ip("netns", "add", "kab-"+n)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", "kab-"+n).Run() })
		ip("-n", "kab-"+n, "link", "set", "lo", "up")
	}
	for i, s := range kaSides {
		peer := fmt.Sprintf("kab%d", i)
		ip("link", "add", "eth0", "netns", "kab-"+s, "type", "veth", "peer", "name", peer, "netns", "kab-srv")
		ip("-n", "kab-"+s, "addr", "add", fmt.Sprintf("192.168.%d.1/24", 71+i), "dev", "eth0")
		ip("-n", "kab-"+s, "link", "set", "eth0", "up")
		ip("-n", "kab-"+s, "route", "add", "10.200.0.0/16", "via", fmt.Sprintf("192.168.%d.2", 71+i))
		ip("-n", "kab-srv", "addr", "add", fmt.Sprintf("192.168.%d.2/24", 71+i), "dev", peer)
		ip("-n", "kab-srv", "link", "set", peer, "up")
	}
	ip("-n", "kab-srv", "route", "add", "local", "10.200.0.0/16", "dev", "lo")
	l.inNS("srv", func() {
		if err := os.WriteFile("/proc/sys/net/core/somaxconn", []byte("65535"), 0o644); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp4", ":80")
		if err != nil {
			t.Fatal(err)
		}
		l.srv = countProbes(ln)
		t.Cleanup(func() { ln.Close() })
	})
	for _, s := range kaSides {
		l.inNS(s, func() {
			c, err := ipvs.Open()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			l.ipvs[s] = c
		})
	}
	return l
}

// inNS runs fn on a thread in the named namespace: sockets made there
// stay in it.
func (l *kaLab) inNS(name string, fn func()) {
	l.t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // not unlocked: the thread ends with the goroutine
		f, err := os.Open("/run/netns/kab-" + name)
		if err != nil {
			l.t.Error(err)
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			l.t.Error(err)
			return
		}
		fn()
	}()
	<-done
	if l.t.Failed() {
		l.t.FailNow()
	}
}

func (l *kaLab) command(side string, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", "kab-" + side, name}, args...)...)
}

func (l *kaLab) write(name, text string) string {
	l.t.Helper()
	p := filepath.Join(l.dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		l.t.Fatal(err)
	}
	return p
}

// probeCounter counts the connections the server accepts, per source
// namespace (by its address), and the gaps between two probes of one
// target by one checker.
type probeCounter struct {
	mu    sync.Mutex
	count map[netip.Addr]int
	last  map[[2]netip.Addr]time.Time
	gaps  map[netip.Addr][]time.Duration
}

func countProbes(ln net.Listener) *probeCounter {
	p := &probeCounter{count: map[netip.Addr]int{}, last: map[[2]netip.Addr]time.Time{}, gaps: map[netip.Addr][]time.Duration{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			now := time.Now()
			from := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
			to := c.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
			c.Close()
			p.mu.Lock()
			p.count[from]++
			key := [2]netip.Addr{from, to}
			if t, ok := p.last[key]; ok {
				p.gaps[from] = append(p.gaps[from], now.Sub(t))
			}
			p.last[key] = now
			p.mu.Unlock()
		}
	}()
	return p
}

// window returns the probes from src counted since the last call (and its
// gaps), and starts a new window.
func (p *probeCounter) window(src netip.Addr) (int, []time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, g := p.count[src], p.gaps[src]
	p.count[src], p.gaps[src] = 0, nil
	return n, g
}

func sideAddr(side string) netip.Addr {
	return netip.AddrFrom4([4]byte{192, 168, byte(71 + slices.Index(kaSides, side)), 1})
}

// weights reads the weight of every real server of a namespace's table.
func (l *kaLab) weights(side string) map[netip.AddrPort]uint32 {
	l.t.Helper()
	c := l.ipvs[side]
	svcs, err := c.Services()
	if err != nil {
		l.t.Fatal(err)
	}
	w := map[netip.AddrPort]uint32{}
	for _, s := range svcs {
		if s.FWMark != 0 {
			continue
		}
		ds, err := c.Destinations(s.Service)
		if err != nil {
			l.t.Fatal(err)
		}
		for _, d := range ds {
			w[netip.AddrPortFrom(d.Addr, d.Port)] = d.Weight
		}
	}
	return w
}

// settled reports whether a table is the configuration's with every
// failed real server at weight 0 and every other at its weight.
func (l *kaLab) settled(side string, c kaTable) string {
	w := l.weights(side)
	want := 0
	for i := range kaServices {
		for _, k := range c.servers(i) {
			want++
			addr := netip.AddrPortFrom(kaRS(k), uint16(kaPort(k)))
			got, ok := w[addr]
			switch {
			case !ok:
				return fmt.Sprintf("%s missing", addr)
			case kaPort(k) == 81 && got != 0:
				return fmt.Sprintf("failed %s at weight %d", addr, got)
			case kaPort(k) == 80 && got != uint32(c.weight(k)):
				return fmt.Sprintf("%s at weight %d, want %d", addr, got, c.weight(k))
			}
		}
	}
	if len(w) != want {
		return fmt.Sprintf("%d real servers, want %d", len(w), want)
	}
	return ""
}

func (l *kaLab) waitSettled(side string, c kaTable, bound time.Duration) time.Duration {
	l.t.Helper()
	start := time.Now()
	report := start.Add(5 * time.Minute)
	for {
		why := l.settled(side, c)
		if why == "" {
			return time.Since(start)
		}
		if time.Since(start) > bound {
			log, _ := os.ReadFile(filepath.Join(l.dir, side+".log"))
			l.t.Fatalf("%s: not settled after %v: %s; %s; its log ends:\n%s", side, bound, why, l.tally(side, c), tailLines(string(log), 40))
		}
		if time.Now().After(report) {
			// A slow side says where it is, every five minutes.
			log, _ := os.ReadFile(filepath.Join(l.dir, side+".log"))
			l.t.Logf("%s: not settled after %v: %s; %s; its log ends:\n%s", side, time.Since(start).Round(time.Second), why, l.tally(side, c), tailLines(string(log), 5))
			report = report.Add(5 * time.Minute)
		}
		time.Sleep(time.Second)
	}
}

// tally counts a table's real servers by weight, failing and passing.
func (l *kaLab) tally(side string, c kaTable) string {
	w := l.weights(side)
	n := map[string]int{}
	for a, weight := range w {
		kind := "passing"
		if a.Port() == 81 {
			kind = "failing"
		}
		n[fmt.Sprintf("%s at %d", kind, weight)]++
	}
	return fmt.Sprint(n)
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// reloaded reports whether the reload's two changes show in the kernel:
// real server 1 at weight 5 and the added one present (at any weight: a
// new server of lvsctl run serves after its first passing check).
func (l *kaLab) reloaded(side string) bool {
	c := l.ipvs[side]
	ds, err := c.Destinations(ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: kaVIP(0), Port: 80})
	if err != nil {
		l.t.Fatal(err)
	}
	changed := false
	for _, d := range ds {
		if d.Addr == kaRS(1) && d.Weight == 5 {
			changed = true
		}
	}
	ds, err = c.Destinations(ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: kaVIP(1), Port: 80})
	if err != nil {
		l.t.Fatal(err)
	}
	for _, d := range ds {
		if d.Addr == kaRS(kaAdded()) && changed {
			return true
		}
	}
	return false
}

// waitReloaded polls every 20 ms and returns the time since start.
func (l *kaLab) waitReloaded(side string, start time.Time, bound time.Duration) time.Duration {
	l.t.Helper()
	for !l.reloaded(side) {
		if time.Since(start) > bound {
			l.t.Fatalf("%s: the reload did not show in %v", side, bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// procCPU is a process's user and system CPU time.
func procCPU(t *testing.T, pid int) (user, sys time.Duration) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(ut) * time.Second / 100, time.Duration(st) * time.Second / 100 // USER_HZ
}

// vmBusy is the CPU time the VM's processor spent on anything but idling:
// what a checker costs wherever the kernel accounts it (softirqs in
// ksoftirqd, the server's side of each handshake).
func vmBusy(t *testing.T) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var busy uint64
	for i, f := range strings.Fields(line)[1:] {
		n, _ := strconv.ParseUint(f, 10, 64)
		if i != 3 && i != 4 && i < 8 { // not idle, iowait; not guest time, counted in user
			busy += n
		}
	}
	return time.Duration(busy) * time.Second / 100
}

// procStatus is a field of /proc/PID/status in KiB (VmHWM, VmRSS).
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	t.Fatalf("%s not in /proc/%d/status", field, pid)
	return 0
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// excess is the 99th percentile of how much later than interval each gap
// came (0 when on time or early).
func excessP99(gaps []time.Duration, interval time.Duration) time.Duration {
	if len(gaps) == 0 {
		return 0
	}
	ex := make([]time.Duration, len(gaps))
	for i, g := range gaps {
		ex[i] = max(0, g-interval)
	}
	slices.Sort(ex)
	return ex[len(ex)*99/100]
}

// sideResult is what one checker measured.
type sideResult struct {
	settle   time.Duration // from the start until the table was right
	probes   int           // answered in the steady window
	cpu      time.Duration // in the steady window
	sys      time.Duration // of which in the kernel
	perK     float64       // ms of CPU per 1,000 probes
	vmPerK   float64       // ms of the whole VM's busy CPU per 1,000 probes
	lateness time.Duration // p99: run's own; keepalived's gaps over the interval
	rss      int64         // peak, KiB, all its processes
	reload   time.Duration // SIGHUP until the change shows in the kernel
}

// checker is one side under measurement: how to start it, its processes,
// its lateness, and how to stop it.
type checker struct {
	side     string
	cmd      *exec.Cmd
	pids     func() []int
	lateness func(gaps []time.Duration) time.Duration
	stop     func()
}

// measure starts a checker alone, waits until its table is right, takes
// its steady cost over kaSteady, then reloads it with the changed
// configuration (written by reconfigure) and stops it.
func (l *kaLab) measure(c *checker, before, after kaTable, reconfigure func(), bound time.Duration) sideResult {
	t := l.t
	t.Helper()
	logf, err := os.Create(filepath.Join(l.dir, c.side+".log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	start := time.Now()
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	var r sideResult
	r.settle = l.waitSettled(c.side, before, bound)
	t.Logf("%s: table right after %v", c.side, time.Since(start).Round(time.Millisecond))
	// Steady means every server has had its checker's verdict: its first
	// probe within an interval, then fall (3) failures for a failing one,
	// which lvsctl run holds at weight 0 meanwhile.
	time.Sleep(max(kaInterval, time.Until(start.Add(5*kaInterval))))
	cpu := func() (time.Duration, time.Duration) {
		var u, k time.Duration
		for _, p := range c.pids() {
			pu, pk := procCPU(t, p)
			u, k = u+pu, k+pk
		}
		return u, k
	}
	l.srv.window(sideAddr(c.side))
	u0, k0 := cpu()
	vm0 := vmBusy(t)
	time.Sleep(kaSteady)
	u1, k1 := cpu()
	vm := vmBusy(t) - vm0
	r.cpu, r.sys = u1-u0+k1-k0, k1-k0
	var gaps []time.Duration
	r.probes, gaps = l.srv.window(sideAddr(c.side))
	if r.probes == 0 {
		t.Fatalf("%s: no probe answered in %v", c.side, kaSteady)
	}
	r.perK = r.cpu.Seconds() * 1000 / float64(r.probes) * 1000
	r.vmPerK = vm.Seconds() * 1000 / float64(r.probes) * 1000
	r.lateness = c.lateness(gaps)
	for _, p := range c.pids() {
		r.rss += procStatus(t, p, "VmHWM")
	}
	reconfigure()
	start = time.Now()
	c.cmd.Process.Signal(syscall.SIGHUP)
	r.reload = l.waitReloaded(c.side, start, bound)
	l.failedOut(c.side, "right after its reload")
	l.waitSettled(c.side, after, bound)
	l.failedOut(c.side, "once settled after its reload")
	if b, err := os.ReadFile(logf.Name()); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "reloaded ") {
				t.Logf("%s: %s", c.side, line) // how long the whole reload took, and its read
			}
		}
	}
	return r
}

// TestKeepalivedSideBySide loads 1,000 services × 10 real servers (100 of
// them failing) into keepalived 2.2.7, then alone into lvsctl run, each
// checking every real server over TCP, and measures for each: the steady
// cost of checking (CPU per 1,000 probes, lateness, peak memory), then the
// time from SIGHUP until the kernel shows a reload's changed weight and
// added real server; and lvsctl apply of the same change. Every failed
// server must stay out through each reload. At full size (make
// bench-keepalived: 20 s between checks, which an emulated processor
// sustains for 10,000 targets) it asserts the targets: reload at least
// 20× faster than keepalived's and within 1.3× of apply; CPU per probe at
// most 0.8× keepalived's (or within 1.6× of the TCP probe floor, where
// that target is at or below it: see probeFloor), p99 lateness at most a tenth
// of the interval, peak RSS at most 64 MiB. A whole-lab run measures 20 services checked
// every 2 s and asserts only correctness.
func TestKeepalivedSideBySide(t *testing.T) {
	full := chooseConfig(t).mode == "full"
	bound := 5 * time.Minute
	if full {
		bound = 60 * time.Minute
	} else {
		kaServices, kaSteady, kaInterval = 20, 10*time.Second, 2*time.Second
	}
	l := newKALab(t)
	before, after := kaTable{}, kaTable{reloaded: true}

	kaConf := l.write("keepalived.conf", before.keepalivedConf())
	ka := &checker{side: "ka", cmd: l.command("ka", "/usr/sbin/keepalived", "--check", "--dont-fork", "--log-console", "--use-file", kaConf,
		"--pid", filepath.Join(l.dir, "keepalived.pid"), "--checkers_pid", filepath.Join(l.dir, "checkers.pid"))}
	ka.pids = func() []int { return []int{ka.cmd.Process.Pid, readPID(t, filepath.Join(l.dir, "checkers.pid"))} }
	ka.lateness = func(gaps []time.Duration) time.Duration { return excessP99(gaps, kaInterval) }
	// keepalived takes minutes to remove 10,000 real servers on SIGTERM:
	// killed, its namespace goes with the table.
	ka.stop = func() {
		for _, p := range ka.pids() {
			syscall.Kill(p, syscall.SIGKILL)
		}
		ka.cmd.Wait()
	}
	kaR := l.measure(ka, before, after, func() { l.write("keepalived.conf", after.keepalivedConf()) }, bound)

	journal := filepath.Join(l.dir, "journal")
	runFile := l.write("director.yaml", before.yaml())
	run := &checker{side: "run", cmd: l.command("run", labtest.Ours("lvsctl"), "run", "--journal-dir", journal, runFile)}
	run.pids = func() []int { return []int{run.cmd.Process.Pid} }
	run.lateness = func([]time.Duration) time.Duration {
		// Exit 1 or 2 says servers are held out (the failing ones) or a
		// service is all down: the document is whole all the same.
		out, err := l.command("run", labtest.Ours("lvsctl"), "status", "--json", "--journal-dir", journal).Output()
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() <= 2) {
			t.Fatalf("lvsctl status: %v\n%s", err, out)
		}
		var st struct {
			Lateness struct {
				RecentP99 time.Duration `json:"recent_p99"`
			} `json:"lateness"`
		}
		if err := json.Unmarshal(out, &st); err != nil {
			t.Fatalf("lvsctl status --json: %v\n%s", err, out)
		}
		return st.Lateness.RecentP99
	}
	run.stop = func() { run.cmd.Process.Signal(syscall.SIGTERM); run.cmd.Wait() }
	runR := l.measure(run, before, after, func() { l.write("director.yaml", after.yaml()) }, bound)

	// lvsctl apply of the same files, in a third namespace.
	applyOld, applyNew := l.write("apply-before.yaml", before.yaml()), l.write("apply-after.yaml", after.yaml())
	if out, err := l.command("apply", labtest.Ours("lvsctl"), "apply", "--journal-dir", filepath.Join(l.dir, "journal-apply"), applyOld).CombinedOutput(); err != nil {
		t.Fatalf("lvsctl apply: %v\n%s", err, out)
	}
	start := time.Now()
	if out, err := l.command("apply", labtest.Ours("lvsctl"), "apply", "--journal-dir", filepath.Join(l.dir, "journal-apply"), applyNew).CombinedOutput(); err != nil {
		t.Fatalf("lvsctl apply: %v\n%s", err, out)
	}
	applyTook := time.Since(start)
	if !l.reloaded("apply") {
		t.Fatal("lvsctl apply did not make the change")
	}

	floor := l.probeFloor(15000)

	n := kaServices * kaPerSvc
	t.Logf("%d real servers (%d failing), TCP checks every %v, steady cost over %v:", n, n/kaFailEvery, kaInterval, kaSteady)
	for _, x := range []struct {
		name string
		r    sideResult
	}{{"keepalived 2.2.7", kaR}, {"lvsctl run", runR}} {
		t.Logf("  %-16s table right after %v; %d probes answered, CPU %v (in the kernel %v) = %.1f ms per 1,000 (whole VM %.1f); lateness p99 %v; peak RSS %d KiB; reload %v",
			x.name, x.r.settle.Round(time.Millisecond), x.r.probes, x.r.cpu, x.r.sys, x.r.perK, x.r.vmPerK, x.r.lateness.Round(time.Millisecond), x.r.rss, x.r.reload.Round(time.Millisecond))
	}
	t.Logf("  lvsctl apply of the reload's change: %v", applyTook.Round(time.Millisecond))
	t.Logf("  the floor, a passing probe's handshake alone (a process of its own, one kept socket, back to back): %.1f ms per 1,000; keepalived %.2f× it, ours %.2f×",
		floor, kaR.perK/floor, runR.perK/floor)
	t.Logf("  CPU per probe, ours / keepalived's: %.2f; reload, keepalived / ours: %.1f×; ours / apply: %.2f",
		runR.perK/kaR.perK, kaR.reload.Seconds()/runR.reload.Seconds(), runR.reload.Seconds()/applyTook.Seconds())
	sum, _ := json.Marshal(benchdata.SideBySide{
		Date: time.Now().UTC().Format(time.DateOnly), RealServers: n, Interval: kaInterval.Seconds(),
		ReloadS:            map[string]float64{"keepalived": kaR.reload.Seconds(), "run": runR.reload.Seconds(), "apply": applyTook.Seconds()},
		CPUPer1000ProbesMS: map[string]float64{"keepalived": kaR.perK, "run": runR.perK, "floor": floor},
		PeakRSSKiB:         map[string]int64{"keepalived": kaR.rss, "run": runR.rss},
		LatenessP99MS:      map[string]float64{"keepalived": float64(kaR.lateness.Microseconds()) / 1000, "run": float64(runR.lateness.Microseconds()) / 1000},
	})
	t.Logf("%s %s", benchdata.SideBySideTag, sum)
	if !full {
		return
	}
	// 0.8× keepalived's CPU is the target, unless that is within a tenth
	// of the floor, which no checker that connects goes below: then ours
	// must stay within 1.6× the floor (1.29× and 1.48× in two boots; the
	// floor itself varied by a sixth between them).
	switch {
	case 0.8*kaR.perK < 1.1*floor:
		t.Logf("CPU: 0.8× keepalived's is %.1f ms per 1,000 probes, the floor %.1f ms: asserting ours within 1.6× the floor", 0.8*kaR.perK, floor)
		if runR.perK > 1.6*floor {
			t.Errorf("CPU per 1,000 probes: ours %.1f ms, the floor %.1f ms: ratio %.2f, at most 1.6", runR.perK, floor, runR.perK/floor)
		}
	case runR.perK > 0.8*kaR.perK:
		t.Errorf("CPU per 1,000 probes: ours %.1f ms, keepalived %.1f ms: ratio %.2f, target at most 0.8", runR.perK, kaR.perK, runR.perK/kaR.perK)
	}
	if runR.lateness > kaInterval/10 {
		t.Errorf("lateness p99 %v, target at most %v", runR.lateness, kaInterval/10)
	}
	if runR.rss > 64<<10 {
		t.Errorf("peak RSS %d KiB, target at most 64 MiB", runR.rss)
	}
	if kaR.reload < 20*runR.reload {
		t.Errorf("reload: keepalived %v, ours %v: %.1f× faster, target at least 20×", kaR.reload, runR.reload, kaR.reload.Seconds()/runR.reload.Seconds())
	}
	if runR.reload.Seconds() > 1.3*applyTook.Seconds() {
		t.Errorf("reload: ours %v, lvsctl apply %v: %.2f×, target at most 1.3×", runR.reload, applyTook, runR.reload.Seconds()/applyTook.Seconds())
	}
}

// probeFloor is the kernel's own cost of a passing TCP probe here, in CPU
// ms per 1,000: a process of its own in the run namespace (as a checker
// is: the server's process is another, and the switches between the two
// count) makes n probes of the passing real servers back to back, the
// cheapest way that completes a handshake: one socket kept, connect,
// poll, connect with AF_UNSPEC to reset. Over veth the server's side of
// each handshake runs within the prober's system calls, as it does for
// both checkers.
func (l *kaLab) probeFloor(n int) float64 {
	l.t.Helper()
	cmd := l.command("run", os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%d", kaFloorEnv, n, kaServices*kaPerSvc))
	out, err := cmd.CombinedOutput()
	if err != nil {
		l.t.Fatalf("probe floor: %v\n%s", err, out)
	}
	_, v, ok := strings.Cut(string(out), "floor-cpu-us ")
	if !ok {
		l.t.Fatalf("probe floor: no figure in\n%s", out)
	}
	us, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
	if err != nil {
		l.t.Fatal(err)
	}
	return us / float64(n)
}

// kaFloorEnv makes the test binary probeFloor's process (TestMain):
// "n,servers".
const kaFloorEnv = "LVSKIT_KA_FLOOR"

// kaFloorChild is probeFloor's process: it prints its CPU time in µs, or
// fails with status 1.
func kaFloorChild(spec string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, format+"\n", a...)
		return 1
	}
	var n, servers int
	if _, err := fmt.Sscanf(spec, "%d,%d", &n, &servers); err != nil {
		return fail("%s=%q: %v", kaFloorEnv, spec, err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail("socket: %v", err)
	}
	defer unix.Close(fd)
	var unspec unix.RawSockaddr
	var r0, r1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &r0)
	done := 0
	for k := 0; done < n; k = (k + 1) % servers {
		if kaPort(k) != 80 {
			continue
		}
		sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: kaRS(k).As4()}
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], 80)
		_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
		if e != 0 && e != unix.EINPROGRESS {
			return fail("connect %s: %v", kaRS(k), e)
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		if n, err := unix.Poll(pfd, 0); err != nil || n != 1 || pfd[0].Revents != unix.POLLOUT {
			if n, err := unix.Poll(pfd, 5000); err != nil || n != 1 || pfd[0].Revents != unix.POLLOUT {
				return fail("connect %s: poll %d %v, events %#x", kaRS(k), n, err, pfd[0].Revents)
			}
		}
		if _, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&unspec)), unsafe.Sizeof(unspec)); e != 0 {
			return fail("reset %s: %v", kaRS(k), e)
		}
		done++
	}
	unix.Getrusage(unix.RUSAGE_SELF, &r1)
	cpu := time.Duration(r1.Utime.Nano()-r0.Utime.Nano()) + time.Duration(r1.Stime.Nano()-r0.Stime.Nano())
	fmt.Printf("floor-cpu-us %d\n", cpu.Microseconds())
	return 0
}

// failedOut checks that every failing real server is at weight 0.
func (l *kaLab) failedOut(side, when string) {
	l.t.Helper()
	w := l.weights(side)
	for k := range kaServices * kaPerSvc {
		if a := netip.AddrPortFrom(kaRS(k), 81); kaPort(k) == 81 && w[a] != 0 {
			l.t.Errorf("%s %s: failed real server %s at weight %d", side, when, a, w[a])
		}
	}
}
