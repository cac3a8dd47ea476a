// Command labrun runs things inside the lab.
//
// The lab is a QEMU VM booting Debian 12's cloud kernel (with IPVS) from an
// initramfs built from Debian packages.
//
//	go run ./lab/labrun -tests [-run REGEX] [-count N] [packages]
//	go run ./lab/labrun -- 'shell command'
//
// With -tests it compiles every package (default ./...) that has test files
// with the "lab" build tag into a static test binary, packs them with bin/*
// and the source tree into one initramfs, and runs the tests of those files
// in one boot per VM: -vms VMs (default one per CPU, at most four) run in
// parallel and take packages from one shared queue. It streams their output
// and prints a summary, which gives for each failed test when it ran and
// whether the host stalled the VM meanwhile. With -- it runs one shell command in the lab with our
// bin/ first on PATH and exits with the command's status. -arch arm64 boots
// Debian's arm64 kernel and user space instead (tests cross-compiled, our
// programs from -bin). See docs/lab.md.
package main

import (
	"context"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

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
	guestPkgs  = "/opt/lvskit/pkgs"
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
	arch        string
	archRoot    string
	binDir      string
	pkgDir      string
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
	fs.StringVar(&o.arch, "arch", "", "the guest's architecture, `ARCH` (amd64, arm64; default the host's)")
	fs.StringVar(&o.archRoot, "arch-root", "", "a foreign guest's unpacked Debian packages, `DIR` (default .cache/lab/ARCH-root; make lab ARCH=arm64 makes it)")
	fs.StringVar(&o.pkgDir, "pkgs", "", "the Debian packages the package tests install in the guest, `DIR` (make lab builds them), at "+guestPkgs)
	fs.StringVar(&o.binDir, "bin", "", "our programs for the guest, `DIR` (default bin/ of the tree; for a foreign -arch the Makefile's build for it)")
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
	archRoot := o.archRoot
	if archRoot == "" && o.arch != "" {
		archRoot = filepath.Join(root, ".cache", "lab", o.arch+"-root")
	}
	arch, err := vm.ArchFor(o.arch, archRoot)
	if err != nil {
		return nil, nil, err
	}
	binDir := o.binDir
	if binDir == "" {
		binDir = filepath.Join(root, "bin")
	}
	if err := checkBinArch(binDir, arch.Name); err != nil {
		return nil, nil, err
	}
	lab, err := vm.New(root, arch, os.Stderr)
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
	files, err := treeFiles(root, binDir)
	if err != nil {
		return nil, nil, err
	}
	if o.pkgDir != "" {
		pkgs, err := os.ReadDir(o.pkgDir)
		if err != nil {
			return nil, nil, fmt.Errorf("-pkgs: %w", err)
		}
		files = append(files, vm.Entry{Path: guestPkgs, Dir: true, Mode: 0o755})
		for _, p := range pkgs {
			if p.Type().IsRegular() {
				files = append(files, vm.Entry{Path: guestPkgs + "/" + p.Name(), HostPath: filepath.Join(o.pkgDir, p.Name()), Mode: 0o644})
			}
		}
	}
	return lab, files, nil
}

// checkBinArch refuses programs in dir built for another architecture
// than the guest's (an amd64 bin/ in the arm64 lab fails every test with
// "exec format error").
func checkBinArch(dir, arch string) error {
	bins, _ := os.ReadDir(dir)
	for _, b := range bins {
		if !b.Type().IsRegular() {
			continue
		}
		f, err := elf.Open(filepath.Join(dir, b.Name()))
		if err != nil {
			continue // not a program
		}
		m := f.Machine
		f.Close()
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
		if m != want {
			return fmt.Errorf("%s is built for %v, not the guest's %s (make lab ARCH=%s builds the programs for it)", filepath.Join(dir, b.Name()), m, arch, arch)
		}
	}
	return nil
}

// treeFiles lists the overlay files taken from the tree: our programs
// (binDir/*) at /opt/lvskit/bin, the source tree (tracked and
// untracked-but-not-ignored files) at /src, and testscripts/golden/hosts
// as /etc/hosts.
func treeFiles(root, binDir string) ([]vm.Entry, error) {
	var files []vm.Entry
	files = append(files, vm.Entry{Path: guestBin, Dir: true, Mode: 0o755})
	bins, _ := os.ReadDir(binDir)
	for _, b := range bins {
		if b.Type().IsRegular() {
			files = append(files, vm.Entry{Path: guestBin + "/" + b.Name(), HostPath: filepath.Join(binDir, b.Name()), Mode: 0o755})
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
