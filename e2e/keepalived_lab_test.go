//go:build lab

package e2e

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/lab/labtest"
	"github.com/lvskit/lvskit/rules"
	"github.com/lvskit/lvskit/rules/keepalived"
)

// oracleDir holds the keepalived configurations the oracle test runs:
// each *.conf is one case (the files below its directories are includes).
const oracleDir = "../rules/keepalived/testdata/oracle"

// oracleRun is where the corpus's MISC_CHECKs find their program: it and
// the directories above it are root's, as lvsctl run requires.
const oracleRun = "/kaoracle"

// oracleCase is one configuration and what its comments say about it:
//
//	# oracle-lossy                  import it with --lossy
//	# oracle-fail ADDR              the real server address to fail (default:
//	                                the first checked one)
//	# oracle-serve KIND/ADDR:PORT   one more listener on the real servers, in
//	                                place of the one its check would get
//	# oracle-diff PHASE +|- LINE    an expected difference in phase up, down
//	                                or back: + a line of lvsctl's table only,
//	                                - one of keepalived's only
//	# oracle-unchanged ka|lv        that director's table does not change
//	                                when the real server fails
//	# oracle-probes N               lvsctl run's table holds N probe services
//	                                (checks via vip; default none), which
//	                                the comparison leaves out
type oracleCase struct {
	name, path string
	lossy      bool
	fail       string
	serve      []string
	diffs      map[string][]string
	unchanged  map[string]bool
	probes     int
	empty      bool // no virtual server: both tables stay empty
}

func readOracleCase(t *testing.T, path string) oracleCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := oracleCase{name: strings.TrimSuffix(filepath.Base(path), ".conf"), path: path, diffs: map[string][]string{}, unchanged: map[string]bool{}}
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "#" || !strings.HasPrefix(f[1], "oracle-") {
			continue
		}
		switch {
		case f[1] == "oracle-lossy":
			c.lossy = true
		case f[1] == "oracle-fail" && len(f) == 3:
			c.fail = f[2]
		case f[1] == "oracle-serve" && len(f) == 3:
			c.serve = append(c.serve, f[2])
		case f[1] == "oracle-unchanged" && len(f) == 3 && (f[2] == "ka" || f[2] == "lv"):
			c.unchanged[f[2]] = true
		case f[1] == "oracle-probes" && len(f) == 3:
			if _, err := fmt.Sscan(f[2], &c.probes); err != nil {
				t.Fatalf("%s: bad directive %q", path, l)
			}
		case f[1] == "oracle-diff" && len(f) > 4:
			c.diffs[f[2]] = append(c.diffs[f[2]], f[3]+" "+strings.Join(f[4:], " "))
		default:
			t.Fatalf("%s: bad directive %q", path, l)
		}
	}
	return c
}

// TestKeepalivedOracle: each configuration of the corpus is loaded by
// keepalived 2.2.7 (its checker alone) in one namespace and by lvsctl
// import + lvsctl run in another, both probing the same real servers (a
// third namespace holding every real server address, on one segment with
// both directors). ipvsadm -Sn of both must be the same once both settle;
// then after one real server fails (its address REJECTed), modulo the one
// documented difference (keepalived deletes a failed server that has no
// inhibit_on_failure, lvsctl sets its weight to 0); then after it comes
// back. Configurations that need --lossy declare the differences they
// make, and those must be exactly the differences seen.
func TestKeepalivedOracle(t *testing.T) {
	runKeepalivedCorpus(t, oracleDir, "ko")
}

// runKeepalivedCorpus compares each configuration of dir (its *.conf; the
// files below its directories are includes), 8 at a time.
func runKeepalivedCorpus(t *testing.T, dir, prefix string) {
	labtest.Require(t)
	paths, err := filepath.Glob(filepath.Join(dir, "*.conf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no corpus in %s: %v", dir, err)
	}
	if err := os.MkdirAll(oracleRun, 0o755); err != nil {
		t.Fatal(err)
	}
	// The corpus's MISC_CHECK: passes when a TCP connect to ADDR PORT does.
	if err := os.WriteFile(filepath.Join(oracleRun, "misc-check"), []byte("#!/usr/bin/bash\nexec 3<>\"/dev/tcp/$1/$2\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The cases run side by side, 8 at a time, each in its own
	// namespaces: t.Run from goroutines, as t.Parallel would be bounded by
	// the VM's processors while the cases mostly wait for checks.
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	var ran atomic.Int32
	start := time.Now()
	for i, p := range paths {
		if p, err = filepath.Abs(p); err != nil {
			t.Fatal(err)
		}
		c := readOracleCase(t, p)
		c.path = quickTimers(t, c.path)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(c.name, func(t *testing.T) {
				ran.Add(1)
				oracleCompare(t, fmt.Sprintf("%s%02d", prefix, i), c)
			})
		}()
	}
	wg.Wait()
	t.Logf("%d of the corpus's %d configurations compared in %v", ran.Load(), len(paths), time.Since(start).Round(time.Second))
}

// slowTimer is a timer of Debian's sample configurations (6 s between
// checks, 3 s timeouts and waits between retries, 30 s for SMTP).
var slowTimer = regexp.MustCompile(`(?m)^(\s*(?:delay_loop|delay_before_retry|connect_timeout|smtp_connect_timeout))\s+[0-9]+\s*$`)

// quickTimers returns a copy of a Debian sample (debian-*.conf) with every
// timer at 1 s, which keepalived and lvsctl both load, so the oracle waits
// seconds, not minutes, for each to notice a failure. Other files, and
// samples with a MISC_CHECK (a program that may take seconds to start on
// the lab's emulated processor), stay as they are.
func quickTimers(t *testing.T, path string) string {
	if strings.Contains(filepath.ToSlash(path), "/testdata/public/") {
		return quickPublic(t, path)
	}
	if !strings.HasPrefix(filepath.Base(path), "debian-") {
		return path
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "MISC_CHECK") {
		return path
	}
	quick := filepath.Join(oracleRun, filepath.Base(path))
	if err := os.WriteFile(quick, slowTimer.ReplaceAll(data, []byte("$1 1")), 0o644); err != nil {
		t.Fatal(err)
	}
	return quick
}

func oracleCompare(t *testing.T, prefix string, c oracleCase) {
	res, err := keepalived.Import(c.path, keepalived.Options{Lossy: c.lossy})
	var refused keepalived.Errors
	switch {
	case errors.As(err, &refused) && len(refused) == 1 && strings.Contains(refused[0].Msg, "no virtual server with real servers"):
		c.empty = true // VRRP only: keepalived's table stays empty
	case errors.As(err, &refused):
		oracleRefused(t, prefix, c, refused)
		return
	case err != nil:
		t.Fatalf("import: %v", err)
	}
	n, serve, firstAddr := oracleNetwork(t, prefix, res, &c)
	if len(serve) > 0 {
		n.start("rs", "checked", serve...)
	}

	if data, err := os.ReadFile(c.path); err == nil && strings.Contains(string(data), "ha_suspend") {
		// ha_suspend: keepalived checks only while its director holds the
		// VIP, as a master does.
		vips := map[string]bool{}
		for _, s := range res.Document.Services {
			if s.Address != "" && !vips[s.Address] {
				vips[s.Address] = true
				n.must("ka", "ip", "addr", "add", s.Address, "dev", "lo")
			}
		}
	}

	// keepalived's checker in ka.
	dir := t.TempDir()
	ka := exec.Command("/usr/sbin/keepalived", "--check", "--dont-fork", "--log-console", "--use-file", c.path,
		"--pid", filepath.Join(dir, "keepalived.pid"), "--checkers_pid", filepath.Join(dir, "checkers.pid"))
	var kaLog syncBuffer
	ka.Stdout, ka.Stderr = &kaLog, &kaLog
	n.in("ka", func() { err = ka.Start() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ka.Process.Signal(syscall.SIGTERM)
		ka.Wait()
		if t.Failed() {
			t.Logf("keepalived's log:\n%s", kaLog.String())
		}
	})

	if c.empty {
		// lvsctl import refuses a file without virtual servers: nothing
		// runs in lv, and keepalived's table must stay empty.
		imp := labtest.Run(t, "", labtest.Ours("lvsctl"), "import", "keepalived", c.path)
		if imp.Code != 2 || !strings.Contains(imp.Stderr, "no virtual server with real servers") {
			t.Errorf("lvsctl import of a file without virtual servers: exit %d\n%s", imp.Code, imp.Stderr)
		}
		took, _ := oracleSettle(t, n, c, "up", "", tables{}, 20*time.Second)
		t.Logf("no virtual servers: keepalived's table empty after %v", took)
		return
	}

	// lvsctl import (the command) and run in lv.
	args := []string{"import", "keepalived", c.path}
	if c.lossy {
		args = []string{"import", "keepalived", "--lossy", c.path}
	}
	imp := labtest.Run(t, "", labtest.Ours("lvsctl"), args...)
	if imp.Code != 0 {
		t.Fatalf("lvsctl %s: exit %d\n%s", strings.Join(args, " "), imp.Code, imp.Stderr)
	}
	yaml := filepath.Join(dir, "director.yaml")
	if err := os.WriteFile(yaml, []byte(imp.Stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	run := n.lvsctlRun("lv", yaml)
	if t.Failed() {
		return
	}

	took := map[string]time.Duration{}
	var up tables
	took["up"], up = oracleSettle(t, n, c, "up", "", tables{}, 60*time.Second)
	if len(c.diffs["up"]) == 0 && !c.empty && !t.Failed() && !strings.Contains(up.ka, " -w 0") {
		// The migration's check: on keepalived's director, the file
		// plans no change (when every real server passes its check).
		var pl labtest.Result
		n.in("ka", func() {
			pl = labtest.Run(t, "", labtest.Ours("lvsctl"), "plan", "--keep-mh-order", "--journal-dir", filepath.Join(dir, "ka-journal"), yaml)
		})
		if pl.Code != 0 {
			t.Errorf("lvsctl plan of the file on keepalived's director: exit %d\n%s%s", pl.Code, pl.Stdout, pl.Stderr)
		}
	}
	c.fail = cmp.Or(c.fail, firstAddr)
	failAddr := netip.MustParseAddr(c.fail)
	ipt := "iptables"
	if failAddr.Is6() {
		ipt = "ip6tables"
	}
	rule := []string{"INPUT", "-d", c.fail, "-j", "REJECT"}
	n.must("rs", ipt, append([]string{"-I"}, rule...)...)
	took["down"], _ = oracleSettle(t, n, c, "down", c.fail, up, 60*time.Second)
	n.must("rs", ipt, append([]string{"-D"}, rule...)...)
	took["back"], _ = oracleSettle(t, n, c, "back", "", up, 60*time.Second)
	if t.Failed() {
		t.Logf("lvsctl's file:\n%s\nlvsctl run's log:\n%s", imp.Stdout, run.text())
		return
	}
	t.Logf("same table: up after %v, %s down after %v, back after %v (%d listeners, lossy %v)",
		took["up"].Round(100*time.Millisecond), c.fail, took["down"].Round(100*time.Millisecond), took["back"].Round(100*time.Millisecond), len(serve), c.lossy)
}

// oracleRefused checks a configuration lvsctl import refuses: keepalived
// loads it (its table holds a service once settled) and the command exits
// 2 naming each refusal.
func oracleRefused(t *testing.T, prefix string, c oracleCase, refused keepalived.Errors) {
	imp := labtest.Run(t, "", labtest.Ours("lvsctl"), "import", "keepalived", c.path)
	if imp.Code != 2 {
		t.Errorf("lvsctl import: exit %d, want 2\n%s", imp.Code, imp.Stderr)
	}
	for _, e := range refused {
		if !strings.Contains(imp.Stderr, e.Error()) {
			t.Errorf("lvsctl import does not report %q:\n%s", e, imp.Stderr)
		}
	}
	res, err := keepalived.Import(c.path, keepalived.Options{Lossy: true})
	if err != nil {
		t.Fatalf("import --lossy: %v", err)
	}
	n, serve, _ := oracleNetwork(t, prefix, res, &c)
	if len(serve) > 0 {
		n.start("rs", "checked", serve...)
	}
	dir := t.TempDir()
	ka := exec.Command("/usr/sbin/keepalived", "--check", "--dont-fork", "--log-console", "--use-file", c.path,
		"--pid", filepath.Join(dir, "keepalived.pid"), "--checkers_pid", filepath.Join(dir, "checkers.pid"))
	var kaLog syncBuffer
	ka.Stdout, ka.Stderr = &kaLog, &kaLog
	n.in("ka", func() { err = ka.Start() })
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ka.Process.Signal(syscall.SIGTERM)
		ka.Wait()
	}()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		if tb := n.must("ka", labtest.RefIpvsadm, "-Sn"); strings.Contains(tb, "-A ") {
			t.Logf("keepalived loads it (%d services); lvsctl refuses %d lines, first %v", strings.Count(tb, "-A "), len(refused), refused[0])
			return
		}
		if time.Now().After(end) {
			t.Fatalf("keepalived's table stays empty; its log:\n%s", kaLog.String())
		}
	}
}

// oracleNetwork builds the case's namespaces: ka and lv (the directors)
// and rs, holding every real server address of res, on one segment. It
// returns the listeners the checks need (started by the caller), the
// first real server address, and sets c.fail to the first checked one
// unless the case names it.
func oracleNetwork(t *testing.T, prefix string, res *keepalived.Result, c *oracleCase) (n *network, serve []string, firstAddr string) {
	// The real servers: every address, and a listener for every check.
	addrs := map[netip.Addr]bool{}
	serve = slices.Clone(c.serve)
	byAddr := map[string]string{} // the stream listener of each address:port the checks probe: its kind
	for _, s := range res.Document.Services {
		for _, d := range s.Destinations {
			a := netip.MustParseAddr(d.Address)
			addrs[a] = true
			firstAddr = cmp.Or(firstAddr, d.Address)
			// The real server's checks: its own, else its service's; one
			// listener for each.
			var checks []health.Spec
			switch {
			case d.Check != nil:
				checks = []health.Spec{*d.Check}
			case d.Checks != nil:
				checks = d.Checks
			case s.Check != nil:
				checks = []health.Spec{*s.Check}
			default:
				checks = s.Checks
			}
			if len(checks) == 0 {
				continue
			}
			if c.fail == "" {
				c.fail = d.Address
			}
			for _, chk := range checks {
				port := d.Port
				if chk.Port != 0 {
					port = uint16(chk.Port)
				}
				if chk.Type == "ping" {
					continue // the kernel answers
				}
				kind := map[string]string{"tcp": "tcp", "http": "tcp", "https": "https", "udp": "udp", "dns": "dns", "exec": "tcp", "smtp": "smtp"}[chk.Type]
				if chk.Type == "exec" {
					port = mustPort(t, chk.Command)
				}
				ap := netip.AddrPortFrom(a, port).String()
				if !slices.ContainsFunc(c.serve, func(s string) bool { return strings.HasSuffix(s, "/"+ap) }) {
					// The case's own listener wins. Of two stream
					// listeners of one port, the one that needs more than
					// a connect wins (a TCP_CHECK beside an SSL_GET: a TLS
					// listener); datagram ones stay beside them.
					switch was, ok := byAddr[ap]; {
					case kind != "tcp" && kind != "https" && kind != "smtp":
						serve = append(serve, kind+"/"+ap)
					case !ok || was == "tcp":
						byAddr[ap] = kind
					}
				}
			}
		}
	}
	for ap, kind := range byAddr {
		serve = append(serve, kind+"/"+ap)
	}
	slices.Sort(serve)
	serve = slices.Compact(serve)

	n = newNetwork(t, prefix, "ka", "lv", "rs")
	n.bridge("br0")
	n.plug("ka", "eth0", "br0", "10.255.255.1/32", "fd00:ff::1/128 nodad")
	n.plug("lv", "eth0", "br0", "10.255.255.2/32", "fd00:ff::2/128 nodad")
	var rsAddrs []string
	for a := range addrs {
		if a.Is4() {
			rsAddrs = append(rsAddrs, a.String()+"/32")
		} else {
			rsAddrs = append(rsAddrs, a.String()+"/128 nodad")
		}
	}
	n.plug("rs", "eth0", "br0", rsAddrs...)
	for _, h := range []string{"ka", "lv", "rs"} {
		n.queue(h, "route add default dev eth0")
		n.queue(h, "route add ::/0 dev eth0")
	}
	n.build()
	return n, serve, firstAddr
}

// mustPort is the PORT of the corpus's MISC_CHECK "misc-check ADDR PORT".
func mustPort(t *testing.T, cmd []string) uint16 {
	t.Helper()
	if len(cmd) != 3 || cmd[0] != oracleRun+"/misc-check" {
		t.Fatalf("MISC_CHECK %q: the corpus runs %s/misc-check ADDR PORT", cmd, oracleRun)
	}
	var p uint16
	if _, err := fmt.Sscan(cmd[2], &p); err != nil {
		t.Fatalf("MISC_CHECK %q: %v", cmd, err)
	}
	return p
}

// tables are the two directors' ipvsadm -Sn.
type tables struct{ ka, lv string }

// oracleSettle waits until the two tables differ exactly as the case
// declares for the phase, and returns how long that took and the tables.
// In phase up both must hold the services and agree on two reads in a
// row; in phase down each table must have changed from was (unless the
// case says it does not), and a real server of failed (an address) that
// lvsctl holds at weight 0 and keepalived deleted is the documented
// difference, not counted; in phase back each must be as it was in was.
// lvsctl's probe services are left out of its table, and must be as many
// as the case declares.
func oracleSettle(t *testing.T, n *network, c oracleCase, phase, failed string, was tables, bound time.Duration) (time.Duration, tables) {
	t.Helper()
	want := slices.Clone(c.diffs[phase])
	slices.Sort(want)
	start := time.Now()
	var got []string
	var now tables
	agreed := 0
	for {
		lv, probes := withoutProbes(n.must("lv", labtest.RefIpvsadm, "-Sn"))
		now = tables{n.must("ka", labtest.RefIpvsadm, "-Sn"), lv}
		got = tableDiff(now.ka, now.lv, failed)
		if probes != c.probes && !c.empty {
			got = append(got, fmt.Sprintf("lvsctl has %d probe services, want %d", probes, c.probes))
		}
		ready := now.lv != "" || c.empty
		switch phase {
		case "down":
			ready = (now.ka != was.ka || c.unchanged["ka"]) && (now.lv != was.lv || c.unchanged["lv"])
		case "back":
			ready = now == was
		}
		if ready && slices.Equal(got, want) {
			agreed++
		} else {
			agreed = 0
		}
		if agreed == 2 {
			return time.Since(start), now
		}
		if time.Since(start) > bound {
			break
		}
		time.Sleep(time.Second)
	}
	t.Errorf("phase %s: after %v the tables differ by %q, want %q\nkeepalived:\n%s\nlvsctl:\n%s", phase, bound, got, want, now.ka, now.lv)
	return 0, now
}

// withoutProbes is an ipvsadm -Sn table without lvsctl run's probe
// services (rules.IsProbeService), which keepalived has no counterpart
// of: they carry the checks that the services compared show the results
// of. n counts them.
func withoutProbes(table string) (rest string, n int) {
	var b strings.Builder
	for _, l := range strings.SplitAfter(table, "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && (f[0] == "-A" || f[0] == "-a") && f[1] == "-f" {
			if m, err := strconv.ParseUint(f[2], 10, 32); err == nil && rules.IsProbeService(&ipvs.Service{FWMark: uint32(m)}) {
				if f[0] == "-A" {
					n++
				}
				continue
			}
		}
		b.WriteString(l)
	}
	return b.String(), n
}

// tableDiff lists, sorted, the lines of lvsctl's table that keepalived's
// lacks ("+ LINE") and the reverse ("- LINE"), leaving out a weight-0 real
// server of the address failed that keepalived deleted.
func tableDiff(ka, lv, failed string) []string {
	kaLines := lineSet(ka)
	kaDests := map[string]bool{}
	for l := range kaLines {
		if key, _, _ := destLine(l); key != "" {
			kaDests[key] = true
		}
	}
	var out []string
	lvLines := lineSet(lv)
	for l := range lvLines {
		if kaLines[l] {
			continue
		}
		if key, addr, weight := destLine(l); failed != "" && key != "" && weight == "0" && addr == failed && !kaDests[key] {
			continue // keepalived deletes, lvsctl sets weight 0
		}
		out = append(out, "+ "+l)
	}
	for l := range kaLines {
		if !lvLines[l] {
			out = append(out, "- "+l)
		}
	}
	slices.Sort(out)
	return out
}

// destLine reads an "-a" line of ipvsadm -Sn: the words up to the real
// server (its key), the real server's address and its weight.
func destLine(l string) (key, addr, weight string) {
	f := strings.Fields(l)
	if len(f) == 0 || f[0] != "-a" {
		return "", "", ""
	}
	r := slices.Index(f, "-r")
	if r < 0 || r+1 >= len(f) {
		return "", "", ""
	}
	if w := slices.Index(f, "-w"); w > 0 && w+1 < len(f) {
		weight = f[w+1]
	}
	return strings.Join(f[:r+2], " "), destAddr(f[r+1]), weight
}

func lineSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			m[l] = true
		}
	}
	return m
}

// destAddr is the address of "ADDR:PORT" or "[ADDR]:PORT".
func destAddr(ap string) string {
	if p, err := netip.ParseAddrPort(ap); err == nil {
		return p.Addr().String()
	}
	return ap
}

// TestKeepalivedHandover follows docs/migrate-keepalived.md's handover on
// one director: keepalived (started with --dont-release-ipvs) builds the
// table; the imported file plans no change; keepalived stops and the
// table stays; lvsctl run takes it over without changing it, and takes
// a failed real server out; keepalived started again with VRRP blocks
// only leaves the table alone.
func TestKeepalivedHandover(t *testing.T) {
	path, err := filepath.Abs(filepath.Join(oracleDir, "17-mh-flags.conf"))
	if err != nil {
		t.Fatal(err)
	}
	c := readOracleCase(t, path)
	res, err := keepalived.Import(path, keepalived.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n, serve, _ := oracleNetwork(t, "kho", res, &c)
	n.start("rs", "checked", serve...)
	dir := t.TempDir()
	startKA := func(conf string) (*exec.Cmd, *syncBuffer) {
		cmd := exec.Command("/usr/sbin/keepalived", "--check", "--dont-fork", "--log-console", "--dont-release-ipvs", "--use-file", conf,
			"--pid", filepath.Join(dir, "keepalived.pid"), "--checkers_pid", filepath.Join(dir, "checkers.pid"))
		var log syncBuffer
		cmd.Stdout, cmd.Stderr = &log, &log
		n.in("ka", func() { err = cmd.Start() })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			if t.Failed() {
				t.Logf("keepalived's log:\n%s", log.String())
			}
		})
		return cmd, &log
	}
	table := func() string { return n.must("ka", labtest.RefIpvsadm, "-Sn") }
	ka, _ := startKA(path)
	want := "-A -t 10.50.0.1:80 -s mh -b mh-fallback,mh-port\n"
	deadline := time.Now().Add(60 * time.Second)
	var before string
	for {
		before = table()
		if strings.Count(before, "-a ") == 2 && strings.Contains(before, " -w 1") && !strings.Contains(before, " -w 0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("keepalived's table never had both real servers:\n%s", before)
		}
		time.Sleep(time.Second)
	}
	if !strings.HasPrefix(before, "-A -t 10.50.0.1:80 -s mh -b ") {
		t.Fatalf("keepalived's table: %s (want a line like %q)", before, want)
	}
	imp := labtest.Run(t, "", labtest.Ours("lvsctl"), "import", "keepalived", path)
	yaml := filepath.Join(dir, "director.yaml")
	if imp.Code != 0 || os.WriteFile(yaml, []byte(imp.Stdout), 0o600) != nil {
		t.Fatalf("import: %+v", imp)
	}
	journal := filepath.Join(dir, "journal")
	var pl labtest.Result
	n.in("ka", func() {
		pl = labtest.Run(t, "", labtest.Ours("lvsctl"), "plan", "--keep-mh-order", "--journal-dir", journal, yaml)
	})
	if pl.Code != 0 {
		t.Fatalf("plan on keepalived's table: exit %d\n%s%s", pl.Code, pl.Stdout, pl.Stderr)
	}

	ka.Process.Signal(syscall.SIGTERM)
	ka.Wait()
	if got := table(); got != before {
		t.Fatalf("keepalived --dont-release-ipvs stopped: the table changed from\n%s\nto\n%s", before, got)
	}
	run := n.lvsctlRun("ka", "--journal-dir", journal, yaml)
	// Four check intervals: the table never changes.
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if got := table(); got != before {
			t.Fatalf("lvsctl run changed the table it took over, from\n%s\nto\n%s\nlog:\n%s", before, got, run.text())
		}
	}
	vrrpOnly := filepath.Join(dir, "vrrp.conf")
	if err := os.WriteFile(vrrpOnly, []byte("vrrp_instance VI_1 {\n    state BACKUP\n    interface eth0\n    virtual_router_id 51\n    priority 100\n    virtual_ipaddress {\n        10.50.0.1/32\n    }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	startKA(vrrpOnly)
	n.must("rs", "iptables", "-I", "INPUT", "-d", "10.60.0.1", "-j", "REJECT")
	n.waitWeight("ka", "10.50.0.1:80", "10.60.0.1:80", "0", 30*time.Second)
	n.must("rs", "iptables", "-D", "INPUT", "-d", "10.60.0.1", "-j", "REJECT")
	n.waitWeight("ka", "10.50.0.1:80", "10.60.0.1:80", "1", 30*time.Second)
	if got := table(); got != before {
		t.Errorf("after the failure and the return, the table is\n%s\nnot\n%s", got, before)
	}
	t.Logf("handed over without a change:\n%s", before)
}
