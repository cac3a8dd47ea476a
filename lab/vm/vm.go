// Package vm is the host side of the lab.
//
// It checks that the Debian packages the lab is made of are installed,
// builds (and caches) the base initramfs from them, and adds a per-run
// overlay with the plan and the files of the run. It boots Debian 12's cloud
// kernel in QEMU (TCG, no network device) and streams back what the guest
// reports. The guest is amd64 (the host's own packages) or arm64 (Debian's
// arm64 packages unpacked beside the tree): Arch holds what differs.
//
// One boot runs a whole plan: the guest's /init (lab/guestinit) runs the
// steps in order and reports each step's output and exit status over a
// second serial port that carries nothing else. A VM that does not reach
// /init, dies, or stops reporting is an error, never a skipped test.
//
// While QEMU runs, its threads' scheduler statistics are sampled from /proc:
// the report keeps the windows in which the host kept the vCPU thread
// waiting (HostWaits), the host's evidence of a VM that stalled as a whole.
package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lvskit/lvskit/lab/internal/wire"
)

// Lab boots VMs from one base image.
type Lab struct {
	Root      string // module root (where go.mod is)
	CacheDir  string // <Root>/.cache/lab
	Arch      *Arch  // the guest's architecture
	Base      *Base
	GuestInit string // the built guest /init
	MemoryMiB int    // guest memory; default 1024
	// BootTimeout bounds the wait for the guest's /init (one retry: TCG
	// boots hang rarely); SlowBoot is the longest boot after which tests
	// are still worth running. An idle 2-core host boots in about 5 s; past
	// either limit the run fails with "host too slow", not with a test that
	// ran out of time somewhere else.
	BootTimeout time.Duration // default 180s
	SlowBoot    time.Duration // default 90s
	Log         io.Writer     // harness messages
	// KernelLog, if set, receives a copy of the kernel console (ttyS0) of
	// every boot; Verbose drops "quiet" from the kernel command line.
	KernelLog string
	Verbose   bool
}

// New prepares a lab of architecture a for the module rooted at root:
// checks that the lab's packages are installed (`make deps` installs them),
// builds or reuses the base image, builds the guest's /init.
func New(root string, a *Arch, log io.Writer) (*Lab, error) {
	if err := checkPackages(a.Packages); err != nil {
		return nil, err
	}
	l := &Lab{
		Root:        root,
		CacheDir:    filepath.Join(root, ".cache", "lab"),
		Arch:        a,
		MemoryMiB:   1024,
		BootTimeout: 180 * time.Second,
		SlowBoot:    90 * time.Second,
		Log:         log,
	}
	base, err := buildBase(l.CacheDir, a, log)
	if err != nil {
		return nil, err
	}
	// Work directories of runs that were killed before they could clean up.
	stale, _ := filepath.Glob(filepath.Join(l.CacheDir, "run-*"))
	for _, d := range stale {
		if fi, err := os.Stat(d); err == nil && time.Since(fi.ModTime()) > 24*time.Hour {
			os.RemoveAll(d)
		}
	}
	l.Base = base
	init, err := l.GoBuild(filepath.Join(l.CacheDir, l.Suffixed("guestinit")), "build", "./lab/guestinit")
	if err != nil {
		return nil, err
	}
	l.GuestInit = init
	return l, nil
}

// Suffixed is name for the host's architecture, name-ARCH for another:
// cache files of the two labs of one tree stay apart.
func (l *Lab) Suffixed(name string) string {
	if !l.Arch.Foreign() {
		return name
	}
	return name + "-" + l.Arch.Name
}

// GoBuild runs the go command in the lab's module root with CGO disabled
// for the guest's architecture (static binaries for the guest): args are
// "build"/"test -c ..." style arguments; -o out is added. It returns out.
func (l *Lab) GoBuild(out string, args ...string) (string, error) {
	return GoBuild(l.Root, l.Arch.Name, out, args...)
}

// GoBuild runs the go command in root with CGO disabled and GOARCH=goarch
// (static linux/goarch binaries for the guest): args are "build"/"test -c
// ..." style arguments; -o out is added. It returns out.
func GoBuild(root, goarch, out string, args ...string) (string, error) {
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	// Build beside out and rename: other lab runs from the same tree may be
	// packing the previous binary right now.
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	defer os.Remove(tmp)
	full := append([]string{args[0], "-trimpath", "-ldflags=-s -w", "-o", tmp}, args[1:]...)
	cmd := exec.Command(goCmd, full...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", goCmd, strings.Join(full, " "), err, buf.String())
	}
	if _, err := os.Stat(tmp); err != nil {
		return "", fmt.Errorf("%s %s wrote nothing", goCmd, strings.Join(full, " "))
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	return out, nil
}

// Run is one boot's work.
type Run struct {
	Plan    wire.Plan
	Files   []Entry       // the overlay: files added to (or replacing) the base image
	Timeout time.Duration // for the whole boot; default 30 minutes
	// Callbacks, called from one goroutine in record order; any may be nil.
	OnBegin  func(step int)
	OnOutput func(step int, stderr bool, p []byte)
	OnEnd    func(step int, r StepResult)
	// Next, if set, makes the plan interactive: the guest runs the step
	// Next returns, first when it is ready and then after each step ends,
	// until Next says there is none left. Several boots can share one
	// queue this way.
	Next func() (step int, ok bool)
}

// StepResult is how a step ended.
type StepResult struct {
	Finished bool // the guest reported its end
	Code     int
	Duration time.Duration
	TimedOut bool
}

// Report describes one completed boot.
type Report struct {
	Steps        []StepResult
	Boots        int           // QEMU starts, including a retry after a hung boot
	Wall         time.Duration // from the first QEMU start to its exit
	BootWall     time.Duration // host time from the (last) QEMU start to the guest's /init
	InitUptime   float64       // guest uptime when /init started (kernel boot)
	ReadyUptime  float64       // guest uptime when the plan started (after modules)
	ModulesTime  time.Duration
	InitrdBytes  int64
	OverlayBytes int64
	Notes        []string // guest diagnostics
	// Host holds the windows in which the host kept the VM's vCPU thread
	// waiting on a run queue: the whole guest stood still meanwhile.
	Host HostWaits
}

// procRoot is where the host's /proc is mounted.
var procRoot = "/proc"

// errBootHung marks an attempt whose guest never reached /init.
var errBootHung = errors.New("the guest did not reach /init")

// Boot runs r in a fresh VM. It returns an error when the VM did not boot
// (after one retry), the guest reported a fatal error, QEMU failed, or the
// plan did not run to its end; the report then says how far it got.
func (l *Lab) Boot(ctx context.Context, r Run) (*Report, error) {
	work, err := os.MkdirTemp(l.CacheDir, "run-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	rep := &Report{Steps: make([]StepResult, len(r.Plan.Steps))}
	initrd := filepath.Join(work, "initrd")
	if err := l.writeInitrd(initrd, r, rep); err != nil {
		return rep, err
	}
	if r.Timeout <= 0 {
		r.Timeout = 30 * time.Minute
	}
	start := time.Now()
	defer func() { rep.Wall = time.Since(start) }()
	for attempt := 1; ; attempt++ {
		rep.Boots++
		console := filepath.Join(work, "console.log")
		err = l.bootOnce(ctx, r, rep, initrd, console)
		if l.KernelLog != "" {
			if b, rerr := os.ReadFile(console); rerr == nil {
				_ = os.WriteFile(l.KernelLog, b, 0o644)
			}
		}
		if errors.Is(err, errBootHung) {
			if attempt == 1 && ctx.Err() == nil {
				fmt.Fprintf(l.Log, "lab: %v within %v; retrying once\n", err, l.BootTimeout)
				continue
			}
			err = fmt.Errorf("lab: host too slow, or the VM hung: %w within %v, %d times (%s)\n%s",
				err, l.BootTimeout, attempt, hostLoad(), l.consoleTail(console))
		}
		return rep, err
	}
}

// writeInitrd writes the base image, zero padding to a 4-byte boundary (the
// kernel looks for a following archive only there; a gzip'd base may end
// anywhere) and the run's overlay as an uncompressed cpio archive.
func (l *Lab) writeInitrd(dst string, r Run, rep *Report) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	base, err := os.Open(l.Base.Path)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, base)
	base.Close()
	if err != nil {
		return err
	}
	if pad := (4 - n%4) % 4; pad > 0 {
		if _, err := out.Write(make([]byte, pad)); err != nil {
			return err
		}
		n += pad
	}
	plan := r.Plan
	plan.Interactive = r.Next != nil
	planJSON, err := jsonMarshal(plan)
	if err != nil {
		return err
	}
	files := append([]Entry{
		{Path: "/init", HostPath: l.GuestInit, Mode: 0o755},
		{Path: wire.PlanPath, Data: planJSON, Mode: 0o644},
	}, r.Files...)
	w := &countingWriter{w: out}
	bw := newBufferedWriter(w)
	if _, err := writeCpio(bw, files); err != nil {
		return fmt.Errorf("lab: overlay: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	rep.OverlayBytes = w.n
	rep.InitrdBytes = n + w.n
	return out.Close()
}

// qemuArgs: the kernel console to a file for diagnostics; the guest's
// ttyS1 is the results channel, on QEMU's stdio.
func (l *Lab) qemuArgs(initrd, console string) []string {
	return l.Arch.qemuArgs(l.MemoryMiB, l.Base.Kernel, initrd, l.cmdline(), console)
}

func (l *Lab) cmdline() string {
	if l.Verbose {
		return "console=" + l.Arch.console + " panic=-1 printk.time=1"
	}
	return "console=" + l.Arch.console + " panic=-1 quiet"
}

func (l *Lab) bootOnce(ctx context.Context, r Run, rep *Report, initrd, console string) error {
	cmd := exec.Command(l.Arch.Qemu, l.qemuArgs(initrd, console)...)
	var qerr bytes.Buffer
	cmd.Stderr = &qerr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	defer stdin.Close()
	// next hands the guest its next step (interactive plans only).
	next := func() {
		if r.Next == nil {
			return
		}
		cmd := wire.CmdDone + "\n"
		if i, ok := r.Next(); ok {
			cmd = fmt.Sprintf("%s %d\n", wire.CmdRun, i)
		}
		_, _ = io.WriteString(stdin, cmd)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("lab: start qemu: %w", err)
	}
	q := &qemuRun{cmd: cmd, started: time.Now()}
	stopWaits := watchWaits(procRoot, cmd.Process.Pid, &rep.Host)
	watchdog := time.AfterFunc(l.BootTimeout, func() {
		q.mu.Lock()
		b := q.booted
		q.mu.Unlock()
		if !b {
			q.kill(errBootHung)
		}
	})
	defer watchdog.Stop()
	overall := time.AfterFunc(r.Timeout, func() { q.kill(fmt.Errorf("lab: the VM ran longer than %v; killed", r.Timeout)) })
	defer overall.Stop()
	stop := context.AfterFunc(ctx, func() { q.kill(ctx.Err()) })
	defer stop()

	l.readResults(q, wire.NewReader(stdout), r, rep, next)
	waitErr := cmd.Wait()
	stopWaits()
	return l.attemptErr(q, waitErr, qerr.String(), rep, console)
}

// qemuRun is one start of QEMU within a boot: why its watchdogs killed it,
// if they did, and what the guest reported over the results channel.
type qemuRun struct {
	cmd     *exec.Cmd
	started time.Time

	mu     sync.Mutex
	booted bool  // the guest reached /init
	reason error // why the VM was killed: the first reason given

	fatal   string // the guest's fatal error
	done    bool   // the guest reported the end of its plan
	readErr error  // the results channel broke
}

// kill stops QEMU, keeping why unless another reason came first.
func (q *qemuRun) kill(why error) {
	q.mu.Lock()
	if q.reason == nil {
		q.reason = why
	}
	q.mu.Unlock()
	_ = q.cmd.Process.Kill()
}

// readResults reads the guest's records until the results channel ends,
// filling rep, calling r's callbacks and handing the guest its next step
// with next. A boot slower than l.SlowBoot is killed as soon as /init
// reports.
func (l *Lab) readResults(q *qemuRun, rd *wire.Reader, r Run, rep *Report, next func()) {
	for {
		rec, err := rd.Next()
		if err != nil {
			if err != io.EOF {
				q.readErr = err
				_ = q.cmd.Process.Kill()
			}
			break
		}
		switch rec.Kind {
		case wire.KindInit:
			q.mu.Lock()
			q.booted = true
			q.mu.Unlock()
			rep.BootWall = time.Since(q.started)
			if l.SlowBoot > 0 && rep.BootWall > l.SlowBoot {
				q.kill(fmt.Errorf("lab: host too slow: the VM took %.0f s to reach /init (limit %v; an idle 2-core host takes about 5 s; %s): "+
					"tests that wait on timers would fail for the wrong reason, so none ran", rep.BootWall.Seconds(), l.SlowBoot, hostLoad()))
			}
			if len(rec.Fields) > 0 {
				rep.InitUptime, _ = strconv.ParseFloat(rec.Fields[0], 64)
			}
		case wire.KindReady:
			if len(rec.Fields) == 3 {
				rep.ReadyUptime, _ = strconv.ParseFloat(rec.Fields[1], 64)
				ms, _ := strconv.Atoi(rec.Fields[2])
				rep.ModulesTime = time.Duration(ms) * time.Millisecond
			}
			next()
		case wire.KindBegin:
			if i, err := rec.Step(); err == nil && i < len(rep.Steps) && r.OnBegin != nil {
				r.OnBegin(i)
			}
		case wire.KindOut, wire.KindErr:
			if i, err := rec.Step(); err == nil && i < len(rep.Steps) && r.OnOutput != nil {
				r.OnOutput(i, rec.Kind == wire.KindErr, rec.Payload)
			}
		case wire.KindEnd:
			i, err := rec.Step()
			if err != nil || i >= len(rep.Steps) || len(rec.Fields) != 4 {
				continue
			}
			code, _ := strconv.Atoi(rec.Fields[1])
			ms, _ := strconv.Atoi(rec.Fields[2])
			sr := StepResult{Finished: true, Code: code, Duration: time.Duration(ms) * time.Millisecond, TimedOut: rec.Fields[3] == "timeout"}
			rep.Steps[i] = sr
			if r.OnEnd != nil {
				r.OnEnd(i, sr)
			}
			next()
		case wire.KindNote:
			rep.Notes = append(rep.Notes, rec.Rest())
		case wire.KindFatal:
			q.fatal = rec.Rest()
		case wire.KindDone:
			q.done = true
		}
	}
}

// attemptErr is how an attempt ended, given QEMU's exit (waitErr, and qerr
// its stderr): errBootHung for a boot to retry, nil when the guest ran its
// whole plan.
func (l *Lab) attemptErr(q *qemuRun, waitErr error, qerr string, rep *Report, console string) error {
	q.mu.Lock()
	why := q.reason
	q.mu.Unlock()
	switch {
	case errors.Is(why, errBootHung):
		return errBootHung
	case why != nil && rep.BootWall > l.SlowBoot && l.SlowBoot > 0:
		return why
	case why != nil:
		return fmt.Errorf("%w\n%s", why, l.consoleTail(console))
	case q.fatal != "":
		return fmt.Errorf("lab: guest failed: %s\n%s", q.fatal, l.consoleTail(console))
	case q.readErr != nil:
		return fmt.Errorf("lab: results channel: %w", q.readErr)
	case !q.done:
		return fmt.Errorf("lab: the VM stopped before finishing its plan (qemu: %v %s)\n%s",
			waitErr, strings.TrimSpace(qerr), l.consoleTail(console))
	case waitErr != nil:
		return fmt.Errorf("lab: qemu: %v: %s", waitErr, strings.TrimSpace(qerr))
	}
	return nil
}

var escapes = regexp.MustCompile(`\x1b(\[[0-9;?]*[a-zA-Z]|c)`)

// consoleTail returns the end of the kernel console log, cleaned of CRs and
// the BIOS's terminal escape codes.
func (l *Lab) consoleTail(console string) string {
	b, err := os.ReadFile(console)
	if err != nil {
		return "(no console log: " + err.Error() + ")"
	}
	s := escapes.ReplaceAllString(strings.ReplaceAll(string(b), "\r", ""), "")
	if strings.TrimSpace(s) == "" {
		return "(the kernel console is empty)"
	}
	var reasons []string
	for _, line := range strings.Split(s, "\n") {
		if panicLine.MatchString(line) && len(reasons) < 5 {
			reasons = append(reasons, line)
		}
	}
	out := "--- kernel console (last lines) ---\n" + tail(s, 40)
	if len(reasons) > 0 {
		out = "--- kernel console: " + strings.Join(reasons, "\n") + "\n" + out
	}
	return out
}

var panicLine = regexp.MustCompile(`Kernel panic|BUG:|Oops|general protection fault|Out of memory`)

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// hostLoad describes the host's load for messages about slowness.
func hostLoad() string {
	b, err := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if err != nil || len(f) < 1 {
		return fmt.Sprintf("%d CPUs", runtime.NumCPU())
	}
	return fmt.Sprintf("load average %s on %d CPUs", f[0], runtime.NumCPU())
}
