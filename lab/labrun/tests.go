package main

// Running the lab tests: build, boot VMs sharing a package queue, summary.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lvskit/lvskit/lab/internal/wire"
	"github.com/lvskit/lvskit/lab/vm"
)

// testPkg is a package with lab tests and its compiled test binary.
type testPkg struct {
	ImportPath string
	Dir        string
	rel        string   // directory relative to the module root
	tests      []string // test functions of its lab files
	run        string   // the -test.run pattern for it
	index      int      // its step in the VMs' plan
	binary     string   // host path of the test binary
	buildErr   error
	result     vm.StepResult
	ran        bool
	vm         int          // the VM that ran it, from 1; 0: none
	output     bytes.Buffer // when output is not streamed live
	count      testCount
}

// testCount counts the top-level test results a -test.v binary reports,
// and keeps the last lines each test logged, so that the summary can
// repeat the failures' own lines after thousands of others. It also notes
// in host time when each test ran: from its "=== RUN" line to its result
// line (a subtest's comes with its parent's).
type testCount struct {
	passed, failed, skipped int
	partial                 []byte // an unfinished line
	current                 string // the test whose lines come
	logs                    map[string][]string
	failures                []string // failed tests, subtests included, in order
	tail                    []string // the package's last lines, whatever test wrote them

	now         func() time.Time // the clock lines are timed by; nil: time.Now
	spans       map[string]span  // each test's last run
	failedSpans map[string]span  // each failed test's last failed run
	lines       span             // the package's first and last line
	step        span             // the package's step in the VM
}

// span is a stretch of host time; a zero end is not known yet.
type span struct{ start, end time.Time }

// keptLines is how many of its last lines a test's log (and a package's
// tail) keeps: enough for a failure's own report and the tables it logs.
const keptLines = 60

func (c *testCount) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// stepBegan and stepEnded note when the package's step began and ended.
func (c *testCount) stepBegan() { c.step.start = c.clock() }
func (c *testCount) stepEnded() { c.step.end = c.clock() }

func (c *testCount) feed(p []byte) {
	at := c.clock()
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			return
		}
		line := string(c.partial[:i])
		c.partial = c.partial[i+1:]
		switch {
		case strings.HasPrefix(line, "--- PASS: "):
			c.passed++
		case strings.HasPrefix(line, "--- FAIL: "):
			c.failed++
		case strings.HasPrefix(line, "--- SKIP: "):
			c.skipped++
		}
		if c.lines.start.IsZero() {
			c.lines.start = at
		}
		c.lines.end = at
		c.keep(line, at)
		c.tail = append(c.tail, line)
		if len(c.tail) > 2*keptLines {
			c.tail = slices.Clone(c.tail[len(c.tail)-keptLines:])
		}
	}
}

// keep files line, which came at host time at, under the test it belongs
// to (go test -v names the test whose output follows in its === lines),
// notes when tests start and end, and notes failed tests.
func (c *testCount) keep(line string, at time.Time) {
	for _, marker := range []string{"=== RUN   ", "=== NAME  ", "=== CONT  "} {
		if name, ok := strings.CutPrefix(line, marker); ok {
			c.current = strings.TrimSpace(name)
			if marker == "=== RUN   " {
				if c.spans == nil {
					c.spans = map[string]span{}
				}
				c.spans[c.current] = span{start: at}
			}
			return
		}
	}
	trimmed := strings.TrimLeft(line, " ")
	for _, result := range []string{"--- PASS: ", "--- FAIL: ", "--- SKIP: "} {
		rest, ok := strings.CutPrefix(trimmed, result)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, " ")
		sp := c.spans[name]
		sp.end = at
		if c.spans != nil {
			c.spans[name] = sp
		}
		if result == "--- FAIL: " {
			if !slices.Contains(c.failures, name) { // -count runs a test again
				c.failures = append(c.failures, name)
			}
			if c.failedSpans == nil {
				c.failedSpans = map[string]span{}
			}
			c.failedSpans[name] = sp
		}
		return
	}
	if strings.HasPrefix(trimmed, "--- ") {
		return // another result line (BENCH)
	}
	if c.current == "" || !strings.HasPrefix(line, "    ") {
		return
	}
	if c.logs == nil {
		c.logs = map[string][]string{}
	}
	l := append(c.logs[c.current], line)
	if len(l) > keptLines {
		l = l[len(l)-keptLines:]
	}
	c.logs[c.current] = l
}

// writeFailures prints the kept lines of each failed test that logged any;
// for a package that failed with no failed test to show (a panic, the test
// timeout, a crash of the binary), the package's own last lines. A line
// after each header gives when the test (or the package) ran in host time
// and the windows of host, if not nil, that overlap it.
func (c *testCount) writeFailures(w io.Writer, pkg string, pkgFailed bool, host *vm.HostWaits) {
	shown := false
	for _, name := range c.failures {
		if lines := c.logs[name]; len(lines) > 0 {
			sp := c.failedSpans[name]
			if sp.start.IsZero() {
				sp.start = c.lines.start // its === RUN line was not seen
			}
			fmt.Fprintf(w, "--- lab: %s %s failed; its last lines:\n    lab: %s\n%s\n", pkg, name, ranLine(sp, host), strings.Join(lines, "\n"))
			shown = true
		}
	}
	if pkgFailed && !shown && len(c.tail) > 0 {
		tail := c.tail[max(0, len(c.tail)-keptLines):]
		sp := c.step // with no end, it ran until its VM ended
		if sp.start.IsZero() {
			sp = c.lines
		}
		fmt.Fprintf(w, "--- lab: %s failed; its last lines:\n    lab: %s\n%s\n", pkg, ranLine(sp, host), strings.Join(tail, "\n"))
	}
}

func runTests(ctx context.Context, o options, patterns []string) int {
	start := time.Now()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	lab, files, err := setup(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "labrun: %v\n", err)
		return exitHarness
	}
	pkgs, code := selectTests(lab.Root, patterns, o.run)
	if pkgs == nil {
		return code
	}
	buildStart := time.Now()
	buildTests(lab, pkgs)
	buildTime := time.Since(buildStart)

	var runnable []*testPkg
	for _, p := range pkgs {
		if p.buildErr == nil {
			p.index = len(runnable)
			runnable = append(runnable, p)
		} else {
			fmt.Printf("--- lab: %s: build failed\n%v\n", p.ImportPath, p.buildErr)
		}
	}
	est := readTimings(lab)
	runs := runVMs(ctx, lab, files, o, runnable, order(runnable, est))
	writeTimings(lab, est, pkgs)
	return summarize(pkgs, runs, buildTime, start)
}

// vmRuns is what the VMs of one run report together.
type vmRuns struct {
	boots   int
	errs    []error
	vmTime  time.Duration   // the longest VM's
	slowest time.Duration   // the slowest boot to /init
	hosts   []*vm.HostWaits // by VM number - 1; nil for a VM that did not report
}

// runVMs boots o.vms VMs in parallel (0: one per CPU, at most
// maxAutoVMs; never more than the packages) and waits for them all.
func runVMs(ctx context.Context, lab *vm.Lab, files []vm.Entry, o options, runnable, queue []*testPkg) vmRuns {
	vms := min(o.vms, len(runnable))
	if vms < 1 {
		vms = min(runtime.NumCPU(), maxAutoVMs, len(runnable))
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
		r  = vmRuns{hosts: make([]*vm.HostWaits, vms)}
	)
	// Every VM carries every test binary and takes the next package from
	// the shared queue whenever it is free.
	next := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(queue) == 0 || ctx.Err() != nil {
			return 0, false
		}
		p := queue[0]
		queue = queue[1:]
		return p.index, true
	}
	for n := 1; n <= vms; n++ {
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			rep, err := bootVM(ctx, lab, files, o, runnable, n, vms == 1, &mu, next)
			mu.Lock()
			defer mu.Unlock()
			if rep != nil {
				r.hosts[n-1] = &rep.Host
				r.boots += rep.Boots
				r.vmTime = max(r.vmTime, rep.Wall)
				r.slowest = max(r.slowest, rep.BootWall)
				if o.verbose {
					fmt.Fprintf(os.Stderr, "lab: VM %d: %.1fs\n", n, rep.Wall.Seconds())
					printTimings(rep)
				}
			}
			if err != nil {
				r.errs = append(r.errs, err)
			}
		}(n)
	}
	wg.Wait()
	return r
}

// summarize prints each package's result and the run's totals, and returns
// labrun's exit status.
func summarize(pkgs []*testPkg, runs vmRuns, buildTime time.Duration, start time.Time) int {
	failed := 0
	var total testCount
	for _, p := range pkgs {
		failedRun := p.buildErr == nil && (!p.ran || !p.result.Finished || p.result.TimedOut || p.result.Code != 0)
		p.count.writeFailures(os.Stdout, p.ImportPath, failedRun, runs.host(p.vm))
	}
	fmt.Println("--- lab summary")
	for _, p := range pkgs {
		status := "ok  "
		switch {
		case p.buildErr != nil:
			status = "FAIL (build)"
		case !p.ran || !p.result.Finished:
			status = "FAIL (did not finish)"
		case p.result.TimedOut:
			status = "FAIL (timeout)"
		case p.result.Code != 0:
			status = fmt.Sprintf("FAIL (exit %d)", p.result.Code)
		}
		total.passed += p.count.passed
		total.skipped += p.count.skipped
		total.failed += p.count.failed
		if status != "ok  " {
			failed++
			if p.count.failed == 0 {
				total.failed++ // the package failed outside any test (build, crash, timeout)
			}
		}
		fmt.Printf("%s\t%s\t%.2fs\t%d passed, %d failed\n", status, p.ImportPath, p.result.Duration.Seconds(), p.count.passed, p.count.failed)
	}
	for i, h := range runs.hosts {
		if h != nil {
			fmt.Printf("lab: VM %d: %s\n", i+1, vmWaitsLine(h))
		}
	}
	for _, err := range runs.errs {
		fmt.Fprintf(os.Stderr, "labrun: %v\n", err)
	}
	fmt.Printf("lab: %d package(s), %d failed; %d boot(s), slowest /init after %.1fs; build %.1fs, VM %.1fs, total %.1fs\n",
		len(pkgs), failed, runs.boots, runs.slowest.Seconds(), buildTime.Seconds(), runs.vmTime.Seconds(), time.Since(start).Seconds())
	skipped := ""
	if total.skipped > 0 {
		skipped = fmt.Sprintf(", %d skipped", total.skipped)
	}
	fmt.Printf("lab: %d passed, %d failed%s\n", total.passed, total.failed, skipped)
	switch {
	case len(runs.errs) > 0:
		return exitHarness
	case failed > 0:
		return exitFail
	}
	return 0
}

// order returns the packages longest first by their last run time, those
// without one (new, or never finished) first of all, so that the VMs
// sharing the queue end at about the same time.
func order(pkgs []*testPkg, est map[string]float64) []*testPkg {
	cost := func(p *testPkg) float64 {
		if c, ok := est[p.ImportPath]; ok {
			return c
		}
		return math.Inf(1)
	}
	sorted := append([]*testPkg(nil), pkgs...)
	sort.SliceStable(sorted, func(i, j int) bool { return cost(sorted[i]) > cost(sorted[j]) })
	return sorted
}

// timingsFile keeps each package's last run time, to order the queue.
func timingsFile(lab *vm.Lab) string {
	return filepath.Join(lab.CacheDir, lab.Suffixed("timings")+".json")
}

func readTimings(lab *vm.Lab) map[string]float64 {
	est := map[string]float64{}
	if b, err := os.ReadFile(timingsFile(lab)); err == nil {
		_ = json.Unmarshal(b, &est)
	}
	return est
}

func writeTimings(lab *vm.Lab, est map[string]float64, pkgs []*testPkg) {
	for _, p := range pkgs {
		if p.result.Finished {
			est[p.ImportPath] = p.result.Duration.Seconds()
		}
	}
	if b, err := json.MarshalIndent(est, "", "  "); err == nil {
		_ = os.WriteFile(timingsFile(lab), b, 0o644)
	}
}

// soakEnv picks the LVSKIT_SOAK* variables of the host's environment: they
// size the long runs of lab tests (make soak), which the guest cannot see
// otherwise.
func soakEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "LVSKIT_SOAK") {
			out = append(out, kv)
		}
	}
	return out
}

// bootVM boots VM number n with every test binary of pkgs and runs the
// packages that next hands it. With live set (a single VM), output streams
// to stdout as it comes; otherwise each package's output is printed whole
// when it ends, under mu.
func bootVM(ctx context.Context, lab *vm.Lab, files []vm.Entry, o options, pkgs []*testPkg, n int, live bool, mu *sync.Mutex, next func() (int, bool)) (*vm.Report, error) {
	run := vm.Run{Files: append([]vm.Entry(nil), files...), Timeout: o.timeout, Next: next}
	run.Files = append(run.Files, vm.Entry{Path: guestTests, Dir: true, Mode: 0o755})
	for _, p := range pkgs {
		guest := guestTests + "/" + filepath.Base(p.binary)
		run.Files = append(run.Files, vm.Entry{Path: guest, HostPath: p.binary, Mode: 0o755})
		argv := []string{guest, "-test.v", "-test.timeout=" + o.testTimeout.String(), "-test.run=" + p.run}
		if o.count > 0 {
			argv = append(argv, fmt.Sprintf("-test.count=%d", o.count))
		}
		dir := guestSrc
		if p.rel != "." {
			dir += "/" + p.rel
		}
		run.Plan.Steps = append(run.Plan.Steps, wire.Step{
			Name:       p.ImportPath,
			Env:        soakEnv(os.Environ()),
			Argv:       argv,
			Dir:        dir,
			TimeoutSec: int(o.testTimeout.Seconds()) + 30,
		})
	}
	var out io.Writer = os.Stdout
	run.OnBegin = func(i int) {
		mu.Lock()
		defer mu.Unlock()
		pkgs[i].ran = true
		pkgs[i].vm = n
		pkgs[i].count.stepBegan()
		if live {
			fmt.Fprintf(out, "=== lab: %s\n", pkgs[i].ImportPath)
		}
	}
	run.OnOutput = func(i int, _ bool, p []byte) {
		mu.Lock()
		defer mu.Unlock()
		pkgs[i].count.feed(p)
		if live {
			out.Write(p)
		} else {
			pkgs[i].output.Write(p)
		}
	}
	run.OnEnd = func(i int, r vm.StepResult) {
		mu.Lock()
		defer mu.Unlock()
		pkgs[i].result = r
		pkgs[i].count.stepEnded()
		if !live {
			fmt.Fprintf(out, "=== lab: %s (%.1fs)\n", pkgs[i].ImportPath, r.Duration.Seconds())
			out.Write(pkgs[i].output.Bytes())
			pkgs[i].output.Reset()
		}
	}
	return lab.Boot(ctx, run)
}

// buildTests compiles each package's lab test binary (static), two at a
// time.
func buildTests(lab *vm.Lab, pkgs []*testPkg) {
	dir := filepath.Join(lab.CacheDir, lab.Suffixed("tests"))
	_ = os.MkdirAll(dir, 0o755)
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, p := range pkgs {
		name := strings.ReplaceAll(p.rel, "/", "_")
		if name == "." {
			name = "root"
		}
		p.binary = filepath.Join(dir, name+".test")
		wg.Add(1)
		go func(p *testPkg) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			_, p.buildErr = lab.GoBuild(p.binary, "test", "-c", "-tags", "lab", p.ImportPath)
		}(p)
	}
	wg.Wait()
}
