// Command labrun runs things inside the lab, a QEMU VM booting Debian 12's
// cloud kernel (with IPVS) from an initramfs built from Debian packages.
//
//	go run ./lab/labrun -tests [-run REGEX] [-count N] [packages]
//	go run ./lab/labrun -- 'shell command'
//
// With -tests it compiles every package (default ./...) that has test files
// with the "lab" build tag into a static test binary, packs them with bin/*
// and the source tree into one initramfs, and runs the tests of those files
// in one boot per VM: -vms VMs (default one per CPU, at most four) run in
// parallel and take packages from one shared queue. It streams their output
// and prints a summary. With -- it runs one shell command in the lab with our
// bin/ first on PATH and exits with the command's status. See docs/lab.md.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/lvskit/lvskit/lab/internal/wire"
	"github.com/lvskit/lvskit/lab/vm"
)

// Exit statuses of the harness itself (in -- mode the command's own status
// is returned otherwise).
const (
	exitFail    = 1   // a test package failed
	exitUsage   = 2   // bad invocation
	exitHarness = 125 // the lab itself failed: packages, build, boot
)

// maxAutoVMs caps the default number of parallel VMs.
const maxAutoVMs = 4

const (
	guestBin   = "/opt/lvskit/bin"
	guestTests = "/opt/lvskit/tests"
	guestSrc   = "/src"
	guestPath  = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

type options struct {
	tests       bool
	run         string
	count       int
	vms         int
	timeout     time.Duration
	testTimeout time.Duration
	bootTimeout time.Duration
	slowBoot    time.Duration
	memoryMiB   int
	verbose     bool
	kernelLog   string
}

func main() {
	os.Exit(mainErr())
}

func mainErr() int {
	var o options
	fs := flag.NewFlagSet("labrun", flag.ContinueOnError)
	fs.BoolVar(&o.tests, "tests", false, "run the lab tests of the given packages (default ./...)")
	fs.StringVar(&o.run, "run", "", "run only tests matching `REGEX` (passed to the test binaries as -test.run)")
	fs.IntVar(&o.count, "count", 0, "run each test `N` times (-test.count)")
	fs.IntVar(&o.vms, "vms", 0, "run the test packages in `N` VMs booted in parallel (0: one per CPU, at most 4)")
	fs.DurationVar(&o.timeout, "timeout", 25*time.Minute, "limit for each VM boot")
	fs.DurationVar(&o.testTimeout, "test-timeout", 10*time.Minute, "limit for each test binary (-test.timeout)")
	fs.DurationVar(&o.bootTimeout, "boot-timeout", 180*time.Second, "limit for a boot to reach the guest's /init (retried once)")
	fs.DurationVar(&o.slowBoot, "slow-boot", 90*time.Second, "a boot that took longer to reach /init ends the run: host too slow")
	fs.IntVar(&o.memoryMiB, "mem", 1024, "guest memory in `MiB` (the soak's 100 MiB restore line needs more than the default)")
	fs.StringVar(&o.kernelLog, "kernel-log", "", "save the kernel console of the (last) boot to `FILE`; with -v not quiet")
	fs.BoolVar(&o.verbose, "v", false, "print the harness's timings and guest notes")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: labrun -tests [flags] [packages]\n       labrun [flags] -- 'shell command' | command args...\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		return exitUsage
	}
	if o.memoryMiB < 256 {
		fmt.Fprintf(os.Stderr, "labrun: -mem %d: a guest needs at least 256 MiB\n", o.memoryMiB)
		return exitUsage
	}
	dashdash := len(os.Args) > 1 && fs.NArg() < len(os.Args)-1 && os.Args[len(os.Args)-fs.NArg()-1] == "--"
	if o.tests == dashdash {
		fs.Usage()
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if dashdash {
		if fs.NArg() == 0 {
			fmt.Fprintln(os.Stderr, "labrun: nothing to run after --")
			return exitUsage
		}
		return runCommand(ctx, o, fs.Args())
	}
	return runTests(ctx, o, fs.Args())
}

func moduleRoot() (string, error) {
	out, err := exec.Command(goCmd(), "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside a Go module")
	}
	return filepath.Dir(mod), nil
}

func goCmd() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// setup prepares the lab and the files every run carries: our binaries,
// the source tree and the golden /etc/hosts.
func setup(o options) (*vm.Lab, []vm.Entry, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, nil, err
	}
	lab, err := vm.New(root, os.Stderr)
	if err != nil {
		return nil, nil, err
	}
	lab.BootTimeout = o.bootTimeout
	lab.SlowBoot = o.slowBoot
	lab.MemoryMiB = o.memoryMiB
	lab.KernelLog = o.kernelLog
	lab.Verbose = o.verbose
	if o.verbose {
		fmt.Fprintf(os.Stderr, "lab: base %s (%s, cached=%v, %.1fs)\n", lab.Base.Path, lab.Base.KVer, lab.Base.Cached, lab.Base.BuildTime.Seconds())
	}
	files, err := treeFiles(root)
	if err != nil {
		return nil, nil, err
	}
	return lab, files, nil
}

// treeFiles lists the overlay files taken from the tree: bin/* at
// /opt/lvskit/bin, the source tree (tracked and untracked-but-not-ignored
// files) at /src, and testscripts/golden/hosts as /etc/hosts.
func treeFiles(root string) ([]vm.Entry, error) {
	var files []vm.Entry
	files = append(files, vm.Entry{Path: guestBin, Dir: true, Mode: 0o755})
	bins, _ := os.ReadDir(filepath.Join(root, "bin"))
	for _, b := range bins {
		if b.Type().IsRegular() {
			files = append(files, vm.Entry{Path: guestBin + "/" + b.Name(), HostPath: filepath.Join(root, "bin", b.Name()), Mode: 0o755})
		}
	}
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	for _, rel := range strings.Split(string(out), "\x00") {
		if rel == "" {
			continue
		}
		p := filepath.Join(root, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			continue // deleted in the work tree
		}
		switch {
		case fi.Mode().IsRegular():
			files = append(files, vm.Entry{Path: guestSrc + "/" + rel, HostPath: p, Mode: fi.Mode().Perm()})
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil {
				files = append(files, vm.Entry{Path: guestSrc + "/" + rel, Link: target})
			}
		}
	}
	hosts := filepath.Join(root, "testscripts", "golden", "hosts")
	if _, err := os.Stat(hosts); err != nil {
		return nil, fmt.Errorf("the lab's /etc/hosts: %w", err)
	}
	files = append(files, vm.Entry{Path: "/etc/hosts", HostPath: hosts, Mode: 0o644})
	return files, nil
}

// runCommand runs one shell command in the lab, with our binaries first on
// PATH, and returns its exit status.
func runCommand(ctx context.Context, o options, args []string) int {
	start := time.Now()
	lab, files, err := setup(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "labrun: %v\n", err)
		return exitHarness
	}
	script := args[0]
	if len(args) > 1 {
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = shellQuote(a)
		}
		script = strings.Join(quoted, " ")
	}
	run := vm.Run{
		Plan: wire.Plan{Steps: []wire.Step{{
			Name: script,
			Argv: []string{"/bin/sh", "-c", script},
			Dir:  guestSrc,
			Env:  []string{"PATH=" + guestBin + ":" + guestPath},
		}}},
		Files:   files,
		Timeout: o.timeout,
		OnOutput: func(_ int, stderr bool, p []byte) {
			if stderr {
				os.Stderr.Write(p)
			} else {
				os.Stdout.Write(p)
			}
		},
	}
	rep, err := lab.Boot(ctx, run)
	fmt.Fprintf(os.Stderr, "lab: %d boot(s), %.1fs in the VM, %.1fs in all\n", rep.Boots, rep.Wall.Seconds(), time.Since(start).Seconds())
	if o.verbose {
		printTimings(rep)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "labrun: %v\n", err)
		return exitHarness
	}
	st := rep.Steps[0]
	if st.TimedOut {
		fmt.Fprintf(os.Stderr, "labrun: command timed out\n")
	}
	return st.Code
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func printTimings(rep *vm.Report) {
	fmt.Fprintf(os.Stderr, "lab: initrd %.1f MB (overlay %.1f MB); /init after %.1fs of host time, at %.2fs uptime; modules loaded in %.2fs; plan started at %.2fs uptime\n",
		float64(rep.InitrdBytes)/1e6, float64(rep.OverlayBytes)/1e6, rep.BootWall.Seconds(), rep.InitUptime, rep.ModulesTime.Seconds(), rep.ReadyUptime)
	for _, n := range rep.Notes {
		fmt.Fprintf(os.Stderr, "lab: guest: %s\n", n)
	}
}

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
	output     bytes.Buffer // when output is not streamed live
	count      testCount
}

// testCount counts the top-level test results a -test.v binary reports.
type testCount struct {
	passed, failed, skipped int
	partial                 []byte // an unfinished line
}

func (c *testCount) feed(p []byte) {
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
	pkgs, err := findLabPackages(lab.Root, patterns)
	if err != nil {
		fmt.Fprintf(os.Stderr, "labrun: %v\n", err)
		return exitHarness
	}
	if len(pkgs) == 0 {
		fmt.Fprintf(os.Stderr, "labrun: no package in %s has lab tests (files with //go:build lab)\n", strings.Join(patterns, " "))
		return exitFail
	}
	var matched []*testPkg
	for _, p := range pkgs {
		pattern, ok, err := runPattern(p.tests, o.run)
		if err != nil {
			fmt.Fprintf(os.Stderr, "labrun: %v\n", err)
			return exitUsage
		}
		if ok {
			p.run = pattern
			matched = append(matched, p)
		}
	}
	if len(matched) == 0 {
		fmt.Fprintf(os.Stderr, "labrun: no lab test in %s matches -run %q\n", strings.Join(patterns, " "), o.run)
		return exitFail
	}
	pkgs = matched
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
	queue := order(runnable, est)
	vms := min(o.vms, len(runnable))
	if vms < 1 {
		vms = min(runtime.NumCPU(), maxAutoVMs, len(runnable))
	}
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		boots   int
		errs    []error
		vmTime  time.Duration
		slowest time.Duration
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
			rep, err := bootVM(ctx, lab, files, o, runnable, vms == 1, &mu, next)
			mu.Lock()
			defer mu.Unlock()
			if rep != nil {
				boots += rep.Boots
				vmTime = max(vmTime, rep.Wall)
				slowest = max(slowest, rep.BootWall)
				if o.verbose {
					fmt.Fprintf(os.Stderr, "lab: VM %d: %.1fs\n", n, rep.Wall.Seconds())
					printTimings(rep)
				}
			}
			if err != nil {
				errs = append(errs, err)
			}
		}(n)
	}
	wg.Wait()
	writeTimings(lab, est, pkgs)

	failed := 0
	var total testCount
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
	for _, err := range errs {
		fmt.Fprintf(os.Stderr, "labrun: %v\n", err)
	}
	fmt.Printf("lab: %d package(s), %d failed; %d boot(s), slowest /init after %.1fs; build %.1fs, VM %.1fs, total %.1fs\n",
		len(pkgs), failed, boots, slowest.Seconds(), buildTime.Seconds(), vmTime.Seconds(), time.Since(start).Seconds())
	skipped := ""
	if total.skipped > 0 {
		skipped = fmt.Sprintf(", %d skipped", total.skipped)
	}
	fmt.Printf("lab: %d passed, %d failed%s\n", total.passed, total.failed, skipped)
	switch {
	case len(errs) > 0:
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
func timingsFile(lab *vm.Lab) string { return filepath.Join(lab.CacheDir, "timings.json") }

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

// bootVM boots one VM with every test binary of pkgs and runs the packages
// that next hands it. With live set (a single VM), output streams to stdout
// as it comes; otherwise each package's output is printed whole when it
// ends, under mu.
func bootVM(ctx context.Context, lab *vm.Lab, files []vm.Entry, o options, pkgs []*testPkg, live bool, mu *sync.Mutex, next func() (int, bool)) (*vm.Report, error) {
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
		if !live {
			fmt.Fprintf(out, "=== lab: %s (%.1fs)\n", pkgs[i].ImportPath, r.Duration.Seconds())
			out.Write(pkgs[i].output.Bytes())
			pkgs[i].output.Reset()
		}
	}
	return lab.Boot(ctx, run)
}

// findLabPackages lists the packages matching patterns that have test files
// built only with the lab tag.
func findLabPackages(root string, patterns []string) ([]*testPkg, error) {
	cmd := exec.Command(goCmd(), append([]string{"list", "-e", "-tags", "lab", "-json=ImportPath,Dir,TestGoFiles,XTestGoFiles,Module"}, patterns...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	var pkgs []*testPkg
	for dec.More() {
		var p struct {
			ImportPath, Dir           string
			TestGoFiles, XTestGoFiles []string
		}
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		lab := false
		var tests []string
		for _, f := range append(p.TestGoFiles, p.XTestGoFiles...) {
			path := filepath.Join(p.Dir, f)
			if !isLabFile(path) {
				continue
			}
			lab = true
			names, err := testFuncs(path)
			if err != nil {
				return nil, err
			}
			tests = append(tests, names...)
		}
		if !lab {
			continue
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		sort.Strings(tests)
		pkgs = append(pkgs, &testPkg{ImportPath: p.ImportPath, Dir: p.Dir, rel: filepath.ToSlash(rel), tests: tests})
	}
	return pkgs, nil
}

// testFuncs returns the names of the test functions a file declares, by
// the go test rule: TestXxx where Xxx does not start with a lower-case
// letter, taking one parameter.
func testFuncs(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Type.Params == nil || len(fn.Type.Params.List) != 1 {
			continue
		}
		name := fn.Name.Name
		if !strings.HasPrefix(name, "Test") || name == "TestMain" {
			continue
		}
		if rest := name[len("Test"):]; rest != "" && unicode.IsLower([]rune(rest)[0]) {
			continue
		}
		names = append(names, name)
	}
	return names, nil
}

// runPattern is the -test.run value that runs only the package's lab tests
// (its other tests ran on the host already and may need host tools), narrowed
// by the user's -run pattern; ok is false when no lab test matches.
func runPattern(tests []string, user string) (pattern string, ok bool, err error) {
	first, rest := user, ""
	if i := splitTopLevel(user); i >= 0 {
		first, rest = user[:i], user[i:]
	}
	var keep []string
	if first == "" {
		keep = tests
	} else {
		re, err := regexp.Compile(first)
		if err != nil {
			return "", false, fmt.Errorf("-run: %w", err)
		}
		for _, t := range tests {
			if re.MatchString(t) {
				keep = append(keep, t)
			}
		}
	}
	if len(keep) == 0 {
		return "", false, nil
	}
	for i, t := range keep {
		keep[i] = regexp.QuoteMeta(t)
	}
	return "^(" + strings.Join(keep, "|") + ")$" + rest, true, nil
}

// splitTopLevel returns the index of the first "/" of a -run pattern that
// separates test from subtest patterns (not inside brackets or parentheses,
// not escaped), or -1.
func splitTopLevel(re string) int {
	depth, class := 0, false
	for i := 0; i < len(re); i++ {
		switch c := re[i]; {
		case c == '\\':
			i++
		case class:
			if c == ']' {
				class = false
			}
		case c == '[':
			class = true
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == '/' && depth == 0:
			return i
		}
	}
	return -1
}

// isLabFile reports whether a Go file's build constraint requires the lab
// tag (it is built with "lab" and not without it).
func isLabFile(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "package ") {
			break
		}
		if !constraint.IsGoBuild(line) {
			continue
		}
		expr, err := constraint.Parse(line)
		if err != nil {
			return false
		}
		with := expr.Eval(func(tag string) bool { return tag == "lab" || tag == "linux" || tag == "amd64" || tag == "unix" })
		without := expr.Eval(func(tag string) bool { return tag == "linux" || tag == "amd64" || tag == "unix" })
		return with && !without
	}
	return false
}

// buildTests compiles each package's lab test binary (static), two at a
// time.
func buildTests(lab *vm.Lab, pkgs []*testPkg) {
	dir := filepath.Join(lab.CacheDir, "tests")
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
			_, p.buildErr = vm.GoBuild(lab.Root, p.binary, "test", "-c", "-tags", "lab", p.ImportPath)
		}(p)
	}
	wg.Wait()
}
