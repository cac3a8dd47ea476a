//go:build lab

package testscripts

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/lab/labtest"
)

// systemPath is PATH for the reference side; ours puts our bin directory
// in front of it.
const systemPath = "/usr/sbin:/usr/bin:/sbin:/bin"

// commandTimeout bounds one corpus command (the longest sleep 3 and send
// traffic under TCG).
const commandTimeout = 90 * time.Second

// snapshotInput is what the runner feeds the reference ipvsadm's -R at
// the end of every file: one process prints the table (-S -n), the
// timeouts, the sync daemons and the thresholds listing (the only
// configuration -S does not write).
const snapshotInput = "-S -n\n-L --timeout\n-L --daemon\n-L -n --thresholds\n"

// side is one of the two implementations under comparison: the programs it
// finds on PATH and the scratch directory its commands run in.
type side struct {
	name string   // "reference" or "ours"
	path []string // PATH, in order
	dir  string   // working directory, private to the side
}

func (s side) env() []string {
	return []string{"PATH=" + strings.Join(s.path, ":"), "HOME=/root"}
}

// lookPath finds a program as sh would with the side's PATH (not the test
// process's).
func (s side) lookPath(prog string) (string, error) {
	if strings.Contains(prog, "/") {
		if !filepath.IsAbs(prog) {
			prog = filepath.Join(s.dir, prog)
		}
		return prog, nil
	}
	for _, d := range s.path {
		p := filepath.Join(d, prog)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found on the %s side's PATH", prog, s.name)
}

// command builds the process for one corpus command: the program itself
// when the line needs no shell (same argv as sh would pass, one fork less
// under TCG), else /bin/sh -c.
func (s side) command(line string) (*exec.Cmd, error) {
	cmd := &exec.Cmd{Path: "/bin/sh", Args: []string{"sh", "-c", line}}
	if argv, ok := simpleArgv(line); ok {
		p, err := s.lookPath(argv[0])
		if err != nil {
			return nil, err
		}
		cmd = &exec.Cmd{Path: p, Args: argv}
	}
	cmd.Env = s.env()
	cmd.Dir = s.dir
	return cmd, nil
}

// newSide creates the side's scratch directory with sbin/ links to the
// ipvsadm programs the side uses, so that a corpus line can call them by a
// path that reads the same on both sides (./sbin/ipvsadm): ipvsadm prints
// argv[0] in its help and "Try ..." texts.
func newSide(t *testing.T, root, name string, path []string, progDir string) side {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Join(dir, "sbin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"ipvsadm", "ipvsadm-save", "ipvsadm-restore"} {
		if err := os.Symlink(filepath.Join(progDir, p), filepath.Join(dir, "sbin", p)); err != nil {
			t.Fatal(err)
		}
	}
	return side{name: name, path: path, dir: dir}
}

// newNetns creates a network namespace with lo up and returns a handle on
// it; the namespace lives as long as the handle is open (or a process runs
// in it).
func newNetns() (ns *os.File, err error) {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer orig.Close()
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
	}
	ns, err = os.Open("/proc/thread-self/ns/net")
	if err == nil {
		// Without lo up the kernel rejects every IPVS destination.
		err = labtest.LinkUp("lo")
	}
	if e := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); e != nil {
		// The thread stays locked and dies with its goroutine.
		return nil, fmt.Errorf("setns back to the original namespace: %w", e)
	}
	runtime.UnlockOSThread()
	if err != nil {
		if ns != nil {
			ns.Close()
		}
		return nil, err
	}
	return ns, nil
}

// startIn starts cmd from a thread that sits in namespace ns, so the
// process (and everything it starts) lives there.
func startIn(ns *os.File, cmd *exec.Cmd) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns: %w", err)
	}
	startErr := cmd.Start()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: it dies with the goroutine instead of
		// serving others from the wrong namespace.
		return fmt.Errorf("setns back to the original namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return startErr
}

// run runs cmd in namespace ns with stdin as its standard input.
func run(t *testing.T, ns *os.File, cmd *exec.Cmd, stdin string) labtest.Result {
	t.Helper()
	return labtest.RunCmd(t, cmd, labtest.RunOptions{
		Stdin:   stdin,
		Timeout: commandTimeout,
		Start:   func(cmd *exec.Cmd) error { return startIn(ns, cmd) },
	})
}

// compareResults describes how ours differs from the reference, or returns
// "" when stdout, stderr and exit status are identical.
func compareResults(ref, ours labtest.Result) string {
	var b strings.Builder
	if ref.Stdout != ours.Stdout {
		fmt.Fprintf(&b, "  stdout (-reference +ours):\n%s", lineDiff(ref.Stdout, ours.Stdout))
	}
	if ref.Stderr != ours.Stderr {
		fmt.Fprintf(&b, "  stderr (-reference +ours):\n%s", lineDiff(ref.Stderr, ours.Stderr))
	}
	if ref.Code != ours.Code {
		fmt.Fprintf(&b, "  exit status: reference %d, ours %d\n", ref.Code, ours.Code)
	}
	return b.String()
}

// deliberateMessages are the texts one of which our side of a @deliberate
// line must print on stderr.
var deliberateMessages = []string{"the IPVS table was not changed", "writing standard output: "}

// fileResult is what one corpus file contributed.
type fileResult struct {
	name                          string
	lines, invocations, identical int
	// deliberate counts the invocations of @deliberate lines that behaved
	// as documented.
	deliberate int
	ran        bool
	failed     bool
	elapsed    time.Duration
	// where the time went: corpus commands, netlink state dumps, the
	// reference snapshot at the end
	inCommands, inState, inSnapshot time.Duration
}

func TestDifferential(t *testing.T) {
	labtest.Require(t)
	paths, err := filepath.Glob("differential/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no corpus in differential/ (cwd must be the package directory): %v", err)
	}
	corpus := map[string][]corpusLine{}
	total := 0
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := parseCorpus(filepath.Base(p), f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		corpus[p] = lines
		for _, l := range lines {
			if l.compared() {
				total += countInvocations(l.Cmd)
			}
		}
	}
	// Our side must really be ours: a missing program would silently fall
	// back to the reference further down PATH.
	for _, p := range []string{"ipvsadm", "ipvsadm-save", "ipvsadm-restore"} {
		if fi, err := os.Stat(labtest.Ours(p)); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("our %s is missing from %s (run make build before the lab): %v", p, labtest.OurBinDir, err)
		}
	}
	// Non-numeric output depends on /etc/hosts: it must be the golden one.
	want, err := os.ReadFile("golden/hosts")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile("/etc/hosts"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("/etc/hosts in the lab is not testscripts/golden/hosts (err %v)", err)
	}

	checkSides(t)

	results := make([]*fileResult, 0, len(paths))
	for _, p := range paths {
		res := &fileResult{name: filepath.Base(p)}
		results = append(results, res)
		t.Run(strings.TrimSuffix(res.name, ".txt"), func(t *testing.T) {
			start := time.Now()
			res.ran = true
			runFile(t, corpus[p], res, labtest.OurBinDir, t.Errorf)
			res.elapsed = time.Since(start)
			res.failed = t.Failed()
		})
	}

	var sum fileResult
	all := true
	var report strings.Builder
	fmt.Fprintf(&report, "%-28s %6s %12s %10s %10s %8s %8s %8s  %s\n", "file", "lines", "invocations", "identical", "deliberate", "seconds", "commands", "state", "result")
	for _, r := range results {
		if !r.ran {
			all = false
			continue
		}
		status := "PASS"
		if r.failed {
			status = "FAIL"
		}
		fmt.Fprintf(&report, "%-28s %6d %12d %10d %10d %8.1f %8.1f %8.1f  %s\n", r.name, r.lines, r.invocations, r.identical, r.deliberate, r.elapsed.Seconds(), r.inCommands.Seconds(), (r.inState + r.inSnapshot).Seconds(), status)
		sum.lines += r.lines
		sum.invocations += r.invocations
		sum.identical += r.identical
		sum.deliberate += r.deliberate
		sum.elapsed += r.elapsed
		sum.inCommands += r.inCommands
		sum.inState += r.inState + r.inSnapshot
	}
	fmt.Fprintf(&report, "%-28s %6d %12d %10d %10d %8.1f %8.1f %8.1f\n", "total", sum.lines, sum.invocations, sum.identical, sum.deliberate, sum.elapsed.Seconds(), sum.inCommands.Seconds(), sum.inState.Seconds())
	t.Logf("differential corpus: %d files, %d invocations in all\n%s", len(paths), total, report.String())
	if total < minInvocations {
		t.Errorf("the corpus has %d invocations; it must keep at least %d", total, minInvocations)
	}
	if all && sum.identical+sum.deliberate != total {
		t.Errorf("%d of %d invocations identical, %d deliberately different as documented", sum.identical, total, sum.deliberate)
	}
	if !all {
		t.Logf("partial run (-run): the identical count covers the files that ran only")
	}
}

// changedLines keeps the - and + lines of a lineDiff: what identifies a
// divergence, whatever the context around it.
func changedLines(diff string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(diff, "\n") {
		if strings.HasPrefix(l, "   -") || strings.HasPrefix(l, "   +") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// checkSides makes sure that each side's shell finds the programs the
// comparison is about: the reference's in /usr/sbin, ours in our bin
// directory, and the sbin/ links of the working directories likewise.
func checkSides(t *testing.T) {
	root := t.TempDir()
	ref, ours := newSides(t, root, labtest.OurBinDir)
	ns, err := newNetns()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	const script = "for p in ipvsadm ipvsadm-save ipvsadm-restore; do command -v $p; done; for p in ipvsadm ipvsadm-save ipvsadm-restore; do readlink sbin/$p; done"
	for _, c := range []struct {
		s   side
		dir string
	}{{ref, "/usr/sbin"}, {ours, labtest.OurBinDir}} {
		cmd, err := c.s.command(script)
		if err != nil {
			t.Fatal(err)
		}
		r := run(t, ns, cmd, "")
		var want strings.Builder
		for range 2 {
			for _, p := range []string{"ipvsadm", "ipvsadm-save", "ipvsadm-restore"} {
				want.WriteString(filepath.Join(c.dir, p) + "\n")
			}
		}
		if r.Code != 0 || r.Stdout != want.String() {
			t.Fatalf("the %s side finds the wrong programs: %+v, want stdout %q", c.s.name, r, want.String())
		}
	}
}

// newSides creates the scratch directories of both sides below root; our
// side finds its programs in oursDir first.
func newSides(t *testing.T, root, oursDir string) (ref, ours side) {
	t.Helper()
	sys := strings.Split(systemPath, ":")
	ref = newSide(t, root, "reference", sys, "/usr/sbin")
	ours = newSide(t, root, "ours", append([]string{oursDir}, sys...), oursDir)
	return ref, ours
}

// fileRun is one corpus file's run: the two sides, each in a fresh network
// namespace of its own with a netlink connection that reads its table, and
// where the file's counts and failures go.
type fileRun struct {
	t                 *testing.T
	res               *fileResult
	errorf            func(format string, args ...any)
	ref, ours         side
	nsRef, nsOurs     *os.File
	connRef, connOurs *ipvsConn
}

// newFileRun sets up a file's run below a temporary root; t's cleanup
// closes and removes it all.
func newFileRun(t *testing.T, res *fileResult, oursDir string, errorf func(format string, args ...any)) *fileRun {
	root, err := os.MkdirTemp("", "differential-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	// Readable by everyone: some lines run commands as nobody.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	ref, ours := newSides(t, root, oursDir)
	nsRef, err := newNetns()
	if err != nil {
		t.Fatalf("reference namespace: %v", err)
	}
	t.Cleanup(func() { nsRef.Close() })
	nsOurs, err := newNetns()
	if err != nil {
		t.Fatalf("our namespace: %v", err)
	}
	t.Cleanup(func() { nsOurs.Close() })

	connRef, err := dialIPVS(nsRef)
	if err != nil {
		t.Fatalf("netlink in the reference namespace: %v", err)
	}
	t.Cleanup(func() { connRef.Close() })
	connOurs, err := dialIPVS(nsOurs)
	if err != nil {
		t.Fatalf("netlink in our namespace: %v", err)
	}
	t.Cleanup(func() { connOurs.Close() })
	return &fileRun{t: t, res: res, errorf: errorf, ref: ref, ours: ours,
		nsRef: nsRef, nsOurs: nsOurs, connRef: connRef, connOurs: connOurs}
}

// state reads the table of c's namespace over netlink.
func (f *fileRun) state(c *ipvsConn) string {
	f.t.Helper()
	defer func(start time.Time) { f.res.inState += time.Since(start) }(time.Now())
	s, err := c.kernelState()
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// runLine runs a corpus command line as side s in namespace ns.
func (f *fileRun) runLine(ns *os.File, s side, line string) labtest.Result {
	f.t.Helper()
	defer func(start time.Time) { f.res.inCommands += time.Since(start) }(time.Now())
	cmd, err := s.command(line)
	if err != nil {
		f.t.Fatal(err)
	}
	return run(f.t, ns, cmd, "")
}

// snap is the reference ipvsadm's listing of ns's tables (snapshotInput).
func (f *fileRun) snap(ns *os.File) snapshot {
	f.t.Helper()
	defer func(start time.Time) { f.res.inSnapshot += time.Since(start) }(time.Now())
	// The reference binary reads both namespaces.
	cmd := &exec.Cmd{Path: labtest.RefIpvsadm, Args: []string{"ipvsadm", "-R"}, Env: f.ref.env(), Dir: f.ref.dir}
	r := run(f.t, ns, cmd, snapshotInput)
	return parseSnapshot(r.Stdout, r.Stderr, r.Code)
}

// runDeliberate runs a @deliberate line on both sides: ours must refuse it
// with one of deliberateMessages and leave its table alone. Both
// namespaces then start over from empty tables. It reports whether ours
// behaved as documented.
func (f *fileRun) runDeliberate(l corpusLine) bool {
	ok := true
	before := f.state(f.connOurs)
	r, o := f.runLine(f.nsRef, f.ref, l.Cmd), f.runLine(f.nsOurs, f.ours, l.Cmd)
	f.t.Logf("%v\n  reference: exit %d, stdout %q, stderr %q\n  ours: exit %d, stdout %q, stderr %q", l, r.Code, r.Stdout, r.Stderr, o.Code, o.Stdout, o.Stderr)
	if !slices.ContainsFunc(deliberateMessages, func(m string) bool { return strings.Contains(o.Stderr, m) }) {
		f.errorf("%v\n  ours did not refuse: stderr %q, want one of %q", l, o.Stderr, deliberateMessages)
		ok = false
	}
	if after := f.state(f.connOurs); after != before {
		f.errorf("%v\n  ours changed its table:\n%s", l, lineDiff(before, after))
		ok = false
	}
	if r, o := f.state(f.connRef), f.state(f.connOurs); r != o {
		f.t.Logf("%v: afterwards the reference's table differs from ours (-reference +ours), as documented:\n%s", l, lineDiff(r, o))
	}
	// Both namespaces start over from empty tables.
	for _, ns := range []*os.File{f.nsRef, f.nsOurs} {
		cmd := &exec.Cmd{Path: labtest.RefIpvsadm, Args: []string{"ipvsadm", "-C"}, Env: f.ref.env(), Dir: f.ref.dir}
		if r := run(f.t, ns, cmd, ""); r.Code != 0 {
			f.t.Fatalf("flushing after %v: %+v", l, r)
		}
	}
	return ok
}

// runFile runs one corpus file in two fresh namespaces.
func runFile(t *testing.T, lines []corpusLine, res *fileResult, oursDir string, errorf func(format string, args ...any)) {
	f := newFileRun(t, res, oursDir, errorf)
	lastStateDiff := ""
	for _, l := range lines {
		res.lines++
		n := 0
		if l.compared() {
			n = countInvocations(l.Cmd)
			res.invocations += n
		}
		ok := true
		switch l.Kind {
		case setup:
			for _, s := range []struct {
				ns *os.File
				sd side
			}{{f.nsRef, f.ref}, {f.nsOurs, f.ours}} {
				if r := f.runLine(s.ns, s.sd, l.Cmd); r.Code != 0 {
					errorf("%v\n  setup failed in the %s namespace: exit %d\n  stdout: %q\n  stderr: %q", l, s.sd.name, r.Code, r.Stdout, r.Stderr)
					ok = false
				}
			}
		case plain:
			if d := compareResults(f.runLine(f.nsRef, f.ref, l.Cmd), f.runLine(f.nsOurs, f.ours, l.Cmd)); d != "" {
				errorf("%v\n%s", l, d)
				ok = false
			}
		case deliberate:
			ok = f.runDeliberate(l)
			lastStateDiff = ""
			if ok {
				res.deliberate += n
			}
			continue
		case same, timing:
			r, o := f.runLine(f.nsRef, f.ref, l.Cmd), f.runLine(f.nsRef, f.ours, l.Cmd)
			if l.Kind == timing {
				r.Stdout, o.Stdout = maskTiming(r.Stdout), maskTiming(o.Stdout)
			}
			if d := compareResults(r, o); d != "" {
				errorf("%v\n%s", l, d)
				ok = false
			}
		}
		// The kernel state of both namespaces, read over netlink, after
		// every line that may change it. (@same lines are read-only; if
		// ours changed the reference's namespace in one, the next
		// comparison shows it.)
		if l.Kind == same {
			if ok {
				res.identical += n
			}
			continue
		}
		key := ""
		if r, o := f.state(f.connRef), f.state(f.connOurs); r != o {
			d := lineDiff(r, o)
			key = changedLines(d)
			ok = false
			// A divergence persists; report it when it starts or changes.
			if key != lastStateDiff {
				errorf("%v\n  the kernel state differs afterwards (-reference namespace +ours):\n%s", l, d)
			}
		}
		lastStateDiff = key
		if ok {
			res.identical += n
		}
	}
	// The final tables as the reference ipvsadm prints them, as a check of
	// the netlink comparison above.
	if d := diffSnapshots(f.snap(f.nsRef), f.snap(f.nsOurs)); d != "" {
		errorf("%s: at the end, the reference ipvsadm lists different tables in the two namespaces:\n%s", res.name, d)
		if lastStateDiff == "" {
			// The netlink comparison saw no divergence, so it cannot say
			// since when the tables differ: no line of the file counts.
			errorf("%s: the netlink state comparison missed this difference; no invocation of the file counts as identical", res.name)
			res.identical = 0
		}
	}
}
