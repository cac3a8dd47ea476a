//go:build lab

package bench

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm"
	"github.com/lvskit/lvskit/lab/labtest"
	"github.com/lvskit/lvskit/names"
	"github.com/lvskit/lvskit/rules"
)

// memLimit is the promised peak memory (resident set) of our ipvsadm for
// -R and -Ln of 10,000 services × 10 destinations.
const memLimit = 32 << 20

// runTimeout bounds one measured command; the reference needs minutes for
// 110,000 restore lines under TCG on a loaded host.
const runTimeout = 30 * time.Minute

// config is how much to measure.
type config struct {
	small, large int // services (× 10 destinations) of the two table sizes
	repsQuick    int // -Ln of an empty table
	repsSmall    int // -Ln, -Sn and -R of the small table
	repsLarge    int // -R and -Ln of the large table
}

var (
	// full is what the project promises figures for.
	full = config{small: 1000, large: 10000, repsQuick: 15, repsSmall: 5, repsLarge: 3}
	// smokeSize keeps a whole-lab run short while exercising every
	// measurement and check; three runs of the 1,000×10 restore give a
	// median that one burst of the busy host's load does not decide.
	smokeSize = config{small: 100, large: 1000, repsQuick: 3, repsSmall: 1, repsLarge: 3}
)

// fullSizeTime is the test time the full-size measurements need at the
// least: the reference alone restores 110,000 lines three times.
const fullSizeTime = 60 * time.Minute

// fullSize reports whether the test's deadline leaves time for the
// full-size measurements. make bench gives the test binary a long
// -test.timeout; a whole-lab run keeps the default ten minutes, and then
// the test measures at smoke size.
func fullSize(t *testing.T) bool {
	deadline, ok := t.Deadline()
	return !ok || time.Until(deadline) > fullSizeTime
}

// side is one implementation under measurement.
type side struct {
	name, ipvsadm string
}

var (
	ref  = side{"reference", labtest.RefIpvsadm}
	ours = side{"ours", labtest.Ours("ipvsadm")}
)

// result is one measured run.
type result struct {
	stdout, stderr string
	code           int
	wall           time.Duration
}

// TestBenchmarks measures both implementations and prints the table of
// docs/benchmarks.md. Besides peak memory it asserts only correctness:
// every measured run must print what the reference prints, and the tables
// restored by both must save identically.
func TestBenchmarks(t *testing.T) {
	labtest.Require(t)
	cfg := smokeSize
	if fullSize(t) {
		cfg = full
	}
	dir := t.TempDir()
	small := writeRules(t, dir, cfg.small)
	large := writeRules(t, dir, cfg.large)
	nsEmpty := newNetns(t)

	var rows []row
	add := func(r row) {
		rows = append(rows, r)
		t.Logf("%s: reference %s, ours %s", r.name, r.refText(), r.oursText())
	}

	// Start-up: -Ln of an empty table is almost nothing but process
	// start, kernel interface set-up and the header.
	add(compareTimes(t, "-Ln, empty table", "≤ 1.5× the reference", cfg.repsQuick,
		func(s side) result { return run(t, nsEmpty, "", s.ipvsadm, "-Ln") }))

	// Listing and saving the small table, before any restore is measured:
	// a closed namespace's destinations wait in the kernel's trash list
	// and are freed in a burst a minute or two later, which would land on
	// these short runs. Both read the same namespace, so both see the
	// same kernel dump order.
	nsList := newNetns(t)
	if res := run(t, nsList, small, ref.ipvsadm, "-R"); res.code != 0 || res.stderr != "" {
		t.Fatalf("reference -R of %s: status %d, %s", tableName(cfg.small), res.code, res.stderr)
	}
	add(compareTimes(t, "-Ln, "+tableName(cfg.small), "≤ 0.5× the reference", cfg.repsSmall,
		func(s side) result { return run(t, nsList, "", s.ipvsadm, "-Ln") }))
	add(compareTimes(t, "-Sn, "+tableName(cfg.small), "≤ 0.5× the reference", cfg.repsSmall,
		func(s side) result { return run(t, nsList, "", s.ipvsadm, "-Sn") }))
	nsList.close(t)

	// -R of the small table, each run into a fresh namespace.
	r, nsRef, nsOurs := compareRestore(t, fmt.Sprintf("-R, %s (%d lines)", tableName(cfg.small), cfg.small*11), "≥ 10× faster",
		cfg.repsSmall, small)
	add(r)
	checkSameTables(t, nsRef, nsOurs, tableName(cfg.small))
	nsRef.close(t)
	nsOurs.close(t)

	// What our -R costs in the kernel alone and in user space alone: the
	// floor any restore pays, and our share.
	for _, size := range []struct {
		services int
		path     string
	}{{cfg.small, small}, {cfg.large, large}} {
		kernel, user := splitRestoreCost(t, size.path)
		t.Logf("-R %s in-process: kernel part (pipelined netlink, no parsing) %v; user part (parse, no kernel) %v",
			tableName(size.services), kernel.Round(time.Millisecond), user.Round(time.Millisecond))
	}

	// The large table: restore, listing, then peak memory.
	r, nsRef, nsOurs = compareRestore(t, fmt.Sprintf("-R, %s (%d lines)", tableName(cfg.large), cfg.large*11), "≥ 10× faster",
		cfg.repsLarge, large)
	add(r)
	checkSameTables(t, nsRef, nsOurs, tableName(cfg.large))
	add(compareTimes(t, "-Ln, "+tableName(cfg.large), "", cfg.repsLarge,
		func(s side) result { return run(t, nsRef, "", s.ipvsadm, "-Ln") }))
	nsOurs.close(t)

	// Peak memory, in runs of their own (traced, see peakRSS).
	add(memRow(t, "peak RSS, -Ln "+tableName(cfg.large), func(s side) int64 {
		return peakRSS(t, nsRef, "", s.ipvsadm, "-Ln")
	}))
	nsRef.close(t)
	add(memRow(t, "peak RSS, -R "+tableName(cfg.large), func(s side) int64 {
		ns := newNetns(t)
		defer ns.close(t)
		return peakRSS(t, ns, large, s.ipvsadm, "-R")
	}))

	for _, m := range rows {
		if m.memory && m.ours > memLimit {
			t.Errorf("%s: our peak RSS %s exceeds %s", m.name, mib(m.ours), mib(memLimit))
		}
	}
	mode := "full size"
	if cfg != full {
		mode = "smoke size (the test timeout leaves no time for full size: use make bench)"
	}
	fmt.Printf("\nBenchmarks, %s, medians of alternating runs:\n%s\n", mode, table(rows))
}

func tableName(services int) string {
	return fmt.Sprintf("%s×10", thousands(services))
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// writeRules writes the restore input of a table with services TCP
// services of 10 masquerading destinations each.
//
// The virtual addresses differ in their last byte: the kernel files
// services in 256 hash buckets chosen by the low 8 bits of the address
// (mixed with the port and protocol), so addresses that all end in the
// same byte put every service in one bucket and make each lookup walk
// them all, for any tool. All addresses lie within 10.0.0.0/8 and
// 192.168.0.0/16, where ipvsadm's wrapping sort comparator is a true
// order, so -Sn sorts identically whatever the kernel's dump order, and
// two namespaces holding the table save identical text.
func writeRules(t *testing.T, dir string, services int) string {
	t.Helper()
	var b bytes.Buffer
	for i := range services {
		x, y := i/250, i%250+1
		fmt.Fprintf(&b, "-A -t 10.0.%d.%d:80 -s wlc\n", x, y)
		for j := 1; j <= 10; j++ {
			fmt.Fprintf(&b, "-a -t 10.0.%d.%d:80 -r 192.168.%d.%d:80 -m -w 1\n", x, y, j, y)
		}
	}
	p := filepath.Join(dir, fmt.Sprintf("rules-%d", services))
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// row is one line of the result table.
type row struct {
	name, target string
	memory       bool  // ref and ours are bytes, not nanoseconds
	ref, ours    int64 // medians (time) or maxima (memory)
	refRuns      []time.Duration
	oursRuns     []time.Duration
}

func (r row) refText() string {
	if r.memory {
		return mib(r.ref)
	}
	return ms(r.ref)
}

func (r row) oursText() string {
	if r.memory {
		return mib(r.ours)
	}
	return ms(r.ours)
}

func ms(ns int64) string { return fmt.Sprintf("%.0f ms", float64(ns)/1e6) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func table(rows []row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| %-34s | %12s | %12s | %-22s | %-22s |\n", "measurement", "reference", "ours", "ours vs reference", "target")
	fmt.Fprintf(&b, "|%s|%s:|%s:|%s|%s|\n", strings.Repeat("-", 36), strings.Repeat("-", 13), strings.Repeat("-", 13), strings.Repeat("-", 24), strings.Repeat("-", 24))
	for _, r := range rows {
		cmp := ""
		switch {
		case r.memory:
			cmp = fmt.Sprintf("%.2f×", float64(r.ours)/float64(r.ref))
		case r.ours > 0 && r.ref > r.ours:
			cmp = fmt.Sprintf("%.2f× (%.1f× faster)", float64(r.ours)/float64(r.ref), float64(r.ref)/float64(r.ours))
		case r.ref > 0:
			cmp = fmt.Sprintf("%.2f×", float64(r.ours)/float64(r.ref))
		}
		target := r.target
		if r.memory {
			target = "≤ 32 MiB"
		}
		fmt.Fprintf(&b, "| %-34s | %12s | %12s | %-22s | %-22s |\n", r.name, r.refText(), r.oursText(), cmp, target)
	}
	return b.String()
}

func median(d []time.Duration) int64 {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return int64(s[len(s)/2])
}

// compareTimes runs fn for both sides reps times, alternating which goes
// first, and requires every run to end like the reference's first run.
func compareTimes(t *testing.T, name, target string, reps int, fn func(side) result) row {
	t.Helper()
	r := row{name: name, target: target}
	var want *result
	for i := range reps {
		order := []side{ref, ours}
		if i%2 == 1 {
			order = []side{ours, ref}
		}
		for _, s := range order {
			got := fn(s)
			if want == nil {
				w := got
				want = &w
				if s != ref {
					t.Fatalf("%s: the reference must run first", name)
				}
			} else if d := differ(*want, got); d != "" {
				t.Errorf("%s, %s run %d: %s", name, s.name, i+1, d)
			}
			if s == ref {
				r.refRuns = append(r.refRuns, got.wall)
			} else {
				r.oursRuns = append(r.oursRuns, got.wall)
			}
		}
	}
	r.ref, r.ours = median(r.refRuns), median(r.oursRuns)
	return r
}

// compareRestore times -R of the rules in path. Every run restores into
// a fresh namespace: a flushed table would not do, because the kernel
// keeps deleted destinations in a trash list for a minute or two and
// searches that list, one entry at a time, for every destination added.
// The namespaces the last runs filled are returned.
func compareRestore(t *testing.T, name, target string, reps int, path string) (row, *netns, *netns) {
	t.Helper()
	var nsRef, nsOurs *netns
	r := compareTimes(t, name, target, reps, func(s side) result {
		ns := &nsRef
		if s == ours {
			ns = &nsOurs
		}
		if *ns != nil {
			(*ns).close(t)
		}
		*ns = newNetns(t)
		return run(t, *ns, path, s.ipvsadm, "-R")
	})
	return r, nsRef, nsOurs
}

// memRow measures the peak memory of one run of each side.
func memRow(t *testing.T, name string, fn func(side) int64) row {
	t.Helper()
	return row{name: name, memory: true, ref: fn(ref), ours: fn(ours)}
}

func differ(want, got result) string {
	if want.stdout == got.stdout && want.stderr == got.stderr && want.code == got.code {
		return ""
	}
	return fmt.Sprintf("got status %d, %d bytes of stdout, stderr %q; the reference gave status %d, %d bytes of stdout, stderr %q (stdout equal: %v)",
		got.code, len(got.stdout), clip(got.stderr), want.code, len(want.stdout), clip(want.stderr), got.stdout == want.stdout)
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// checkSameTables requires the tables the two restores left to save
// identically, with the reference's -Sn in both namespaces and with ours.
func checkSameTables(t *testing.T, nsRef, nsOurs *netns, name string) {
	t.Helper()
	a := run(t, nsRef, "", ref.ipvsadm, "-Sn")
	b := run(t, nsOurs, "", ref.ipvsadm, "-Sn")
	c := run(t, nsOurs, "", ours.ipvsadm, "-Sn")
	if a.code != 0 || b.code != 0 || a.stderr != "" || b.stderr != "" {
		t.Fatalf("%s: -Sn failed: %+v / %+v", name, a, b)
	}
	if a.stdout != b.stdout {
		t.Errorf("%s: the table restored by ours saves differently from the reference's (%d vs %d bytes)", name, len(b.stdout), len(a.stdout))
	}
	if d := differ(b, c); d != "" {
		t.Errorf("%s: our -Sn differs from the reference's on the same table: %s", name, d)
	}
	t.Logf("%s: both restored tables save to the same %d lines", name, strings.Count(a.stdout, "\n"))
}

// splitRestoreCost measures, in this process, what restoring the rules in
// path costs the kernel alone (the requests prepared beforehand and sent
// pipelined on one socket) and what our parsing costs alone (the restore
// engine in front of a connection that answers at once).
func splitRestoreCost(t *testing.T, path string) (kernel, user time.Duration) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := &ipvsadm.Program{Resolver: names.NewResolver()}
	var reqs []ipvs.Request
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		inv, o := p.Parse(append([]string{"ipvsadm"}, strings.Fields(line)...))
		if o != nil {
			t.Fatalf("%s: %+v", line, o)
		}
		req, ok := inv.Request()
		if !ok {
			t.Fatalf("%s: no request", line)
		}
		reqs = append(reqs, req)
	}

	ns := newNetns(t)
	defer ns.close(t)
	c := openIn(t, ns)
	defer c.Close()
	start := time.Now()
	pipe := c.Pipeline(rules.DefaultWindow)
	failed := 0
	for _, req := range reqs {
		if err := pipe.Submit(req, func(err error) {
			if err != nil {
				failed++
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pipe.Flush(); err != nil {
		t.Fatal(err)
	}
	kernel = time.Since(start)
	if failed != 0 {
		t.Fatalf("%d requests failed", failed)
	}

	env := ipvsadm.Env{
		Open:          func() (ipvs.Client, error) { return answerAtOnce{c}, nil },
		Resolver:      names.NewResolver(),
		RestoreEngine: rules.Pipelined(rules.DefaultWindow),
	}
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	start = time.Now()
	if st := ipvsadm.Main([]string{"ipvsadm", "-R"}, in, io.Discard, io.Discard, env); st != 0 {
		t.Fatalf("in-process restore: status %d", st)
	}
	return kernel, time.Since(start)
}

// answerAtOnce is a connection whose changes succeed without reaching the
// kernel.
type answerAtOnce struct{ ipvs.Client }

func (answerAtOnce) Pipeline(int) ipvs.Pipeline { return okPipeline{} }
func (answerAtOnce) Close() error               { return nil }

type okPipeline struct{}

func (okPipeline) Submit(_ ipvs.Request, done func(error)) error { done(nil); return nil }
func (okPipeline) Flush() error                                  { return nil }

// openIn opens our netlink client in namespace ns: the socket stays
// there when the thread returns to its own namespace.
func openIn(t *testing.T, ns *netns) *ipvs.Conn {
	t.Helper()
	var c *ipvs.Conn
	inNetns(t, ns, func() {
		var err error
		if c, err = ipvs.Open(); err != nil {
			t.Fatalf("ipvs.Open: %v", err)
		}
	})
	return c
}

// netns is a network namespace kept alive by an open handle.
type netns struct{ f *os.File }

// newNetns creates a network namespace with lo up. It lives until close
// or the end of the test.
func newNetns(t *testing.T) *netns {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		t.Fatalf("unshare(CLONE_NEWNET): %v", err)
	}
	f, err := os.Open("/proc/thread-self/ns/net")
	if err == nil {
		err = labtest.LinkUp("lo") // without lo up the kernel refuses destinations
	}
	if e := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); e != nil {
		panic(fmt.Sprintf("setns back to the original namespace: %v", e))
	}
	if err != nil {
		t.Fatal(err)
	}
	ns := &netns{f}
	t.Cleanup(func() { ns.close(t) })
	return ns
}

// close drops the namespace (the kernel dismantles it in the background:
// waitIdle lets that finish before the next measurement).
func (ns *netns) close(t *testing.T) {
	if ns.f != nil {
		ns.f.Close()
		ns.f = nil
	}
}

// inNetns runs fn on a thread in namespace ns.
func inNetns(t *testing.T, ns *netns, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	if ns.f == nil {
		t.Fatal("inNetns: the namespace was closed")
	}
	if err := unix.Setns(int(ns.f.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatalf("setns: %v", err)
	}
	defer func() {
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			panic(fmt.Sprintf("setns back to the original namespace: %v", err))
		}
	}()
	fn()
}

// openStdin opens the file a measured run reads (/dev/null for "").
func openStdin(t *testing.T, path string) *os.File {
	t.Helper()
	if path == "" {
		path = os.DevNull
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// run runs the program at path in namespace ns with argv[0] "ipvsadm",
// stdin from the file stdinPath (or /dev/null) and stdout and stderr into
// files, as a shell redirection would give them (no pipe, no copying
// goroutine on our side), and measures its wall time.
func run(t *testing.T, ns *netns, stdinPath, path string, args ...string) result {
	t.Helper()
	stdin := openStdin(t, stdinPath)
	defer stdin.Close()
	out, err := os.CreateTemp("", "bench-out-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(out.Name())
	defer out.Close()
	errf, err := os.CreateTemp("", "bench-err-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(errf.Name())
	defer errf.Close()

	cmd := &exec.Cmd{Path: path, Args: append([]string{"ipvsadm"}, args...), Stdin: stdin, Stdout: out, Stderr: errf,
		Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}}
	waitIdle(t)
	var start time.Time
	inNetns(t, ns, func() {
		start = time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", path, err)
		}
	})
	timer := time.AfterFunc(runTimeout, func() { _ = cmd.Process.Kill() })
	err = cmd.Wait()
	wall := time.Since(start)
	timer.Stop()
	res := result{wall: wall}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%s %q: %v", path, args, err)
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("%s %q: killed by %v after %v", path, args, ws.Signal(), wall)
		}
		res.code = ee.ExitCode()
	}
	o, _ := os.ReadFile(out.Name())
	e, _ := os.ReadFile(errf.Name())
	res.stdout, res.stderr = string(o), string(e)
	return res
}

// peakRSS runs the program like run and returns its peak resident set
// size: VmHWM of /proc/<pid>/status read when the process is about to
// exit, which covers the program's own memory image only.
//
// The wait4 rusage (ru_maxrss) cannot be used: Go starts children with a
// vfork-style clone that shares this test's memory until exec, and exec
// records that memory's high-water mark in the child's ru_maxrss. The
// process is traced to stop it at its exit (PTRACE_O_TRACEEXIT); signals
// it gets on the way are passed on.
func peakRSS(t *testing.T, ns *netns, stdinPath, path string, args ...string) int64 {
	t.Helper()
	stdin := openStdin(t, stdinPath)
	defer stdin.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	var hwm int64 = -1
	inNetns(t, ns, func() {
		// The tracer is this thread: inNetns keeps it locked until the
		// child is gone.
		proc, err := os.StartProcess(path, append([]string{"ipvsadm"}, args...), &os.ProcAttr{
			Env:   []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
			Files: []*os.File{stdin, null, null},
			Sys:   &syscall.SysProcAttr{Ptrace: true},
		})
		if err != nil {
			t.Fatalf("start %s: %v", path, err)
		}
		defer proc.Release()
		pid := proc.Pid
		var ws unix.WaitStatus
		// The first stop is the one after exec.
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
			t.Fatalf("%s: waiting for the exec stop: %v (status %v)", path, err, ws)
		}
		if err := unix.PtraceSetOptions(pid, unix.PTRACE_O_TRACEEXIT); err != nil {
			t.Fatalf("PTRACE_SETOPTIONS: %v", err)
		}
		sig := 0
		for {
			if err := unix.PtraceCont(pid, sig); err != nil {
				t.Fatalf("PTRACE_CONT: %v", err)
			}
			if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
				t.Fatalf("wait4: %v", err)
			}
			if ws.Exited() || ws.Signaled() {
				break
			}
			sig = 0
			if ws.TrapCause() == unix.PTRACE_EVENT_EXIT {
				hwm = vmHWM(t, pid)
				continue
			}
			if s := ws.StopSignal(); s != unix.SIGTRAP {
				sig = int(s)
			}
		}
	})
	if hwm < 0 {
		t.Fatalf("%s %q: exited without the exit stop", path, args)
	}
	return hwm
}

// vmHWM reads a process's peak resident set size in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// waitIdle waits until the VM's CPU has been idle for a second, so that
// work left behind by earlier runs does not count against the next one.
// Dismantling a namespace that held 110,000 destinations takes the kernel
// many seconds under TCG, in steps separated by idle waits for RCU grace
// periods: a short idle spell does not mean it is over.
func waitIdle(t *testing.T) {
	t.Helper()
	if skipIdleWait {
		return
	}
	const (
		step   = 100 * time.Millisecond
		spells = 10 // consecutive idle steps
	)
	deadline := time.Now().Add(10 * time.Minute)
	prevIdle, prevTotal := cpuTimes(t)
	quiet := 0
	for time.Now().Before(deadline) {
		time.Sleep(step)
		idle, total := cpuTimes(t)
		if total > prevTotal && float64(idle-prevIdle)/float64(total-prevTotal) >= 0.95 {
			quiet++
			if quiet == spells {
				return
			}
		} else {
			quiet = 0
		}
		prevIdle, prevTotal = idle, total
	}
	t.Logf("the CPU did not stay idle for a second within 10 minutes; measuring anyway")
}

// skipIdleWait turns waitIdle off, for a measurement on a host too busy to
// ever leave the VM idle for a second (the figures are then noisier, and
// said to be).
var skipIdleWait bool

// cpuTimes returns the idle and total jiffies of /proc/stat's cpu line.
func cpuTimes(t *testing.T) (idle, total uint64) {
	t.Helper()
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	for i, f := range fields[1:] {
		var v uint64
		fmt.Sscan(f, &v)
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return idle, total
}
