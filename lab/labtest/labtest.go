//go:build linux

// Package labtest holds the helpers lab tests use inside the QEMU lab.
//
// Lab tests are files built with the `lab` build tag. The helpers are a
// check that the test really runs in the lab, a fresh network namespace per
// test, and runners for the reference ipvsadm, our binaries and shell
// snippets in that namespace.
//
// IPVS state (services, destinations, sync daemons, timeouts) is per network
// namespace, so giving every test its own namespace keeps tests from seeing
// each other's tables even though they share one VM boot.
package labtest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// RefIpvsadm is Debian 12's ipvsadm 1.31 binary inside the lab: the
// reference our ipvsadm is compared against. Debian's ipvsadm-save and
// ipvsadm-restore wrapper scripts sit beside it.
const RefIpvsadm = "/usr/sbin/ipvsadm"

// RefIpvsadmSave and RefIpvsadmRestore are Debian's wrapper scripts (bash).
// They run "ipvsadm" from their own PATH, which finds RefIpvsadm.
const (
	RefIpvsadmSave    = "/usr/sbin/ipvsadm-save"
	RefIpvsadmRestore = "/usr/sbin/ipvsadm-restore"
)

// OurBinDir is where the lab puts the binaries built from this tree (the
// contents of bin/). It is not on PATH ahead of the system directories
// unless a test asks for it, so tests always say which ipvsadm they mean.
const OurBinDir = "/opt/lvskit/bin"

// SrcDir is where the lab puts the source tree (tracked files). Test
// binaries run with their package directory below it as working directory.
const SrcDir = "/src"

// RunTimeout bounds every command started by Run and Sh.
const RunTimeout = 60 * time.Second

// Ours returns the path of one of our binaries inside the lab.
func Ours(name string) string { return filepath.Join(OurBinDir, name) }

// inLab reports whether the process runs inside the lab VM.
func inLab() bool { return os.Getenv("LVSKIT_LAB") == "1" }

// Require fails the test unless it runs inside the lab. Lab tests never skip:
// a lab test that runs elsewhere is a mistake in how it was started.
func Require(t testing.TB) {
	t.Helper()
	if !inLab() {
		t.Fatal("this is a lab test: run it inside the QEMU lab (make lab), not on the host (LVSKIT_LAB=1 is not set)")
	}
}

// Netns moves the calling goroutine into a fresh network namespace with the
// loopback interface up, for the rest of the test. It locks the goroutine to
// its OS thread, so every socket it opens and every process it starts (Run,
// Sh, exec.Command) lives in the new namespace. A cleanup moves the thread
// back to the original namespace; if that fails the thread stays locked and
// the runtime discards it when the test's goroutine ends.
//
// Goroutines the test starts (including subtests) do not inherit the
// namespace: call Netns in each subtest that needs one.
func Netns(t testing.TB) {
	t.Helper()
	Require(t)
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("labtest.Netns: %v", err)
	}
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		orig.Close()
		runtime.UnlockOSThread()
		t.Fatalf("labtest.Netns: unshare(CLONE_NEWNET): %v", err)
	}
	t.Cleanup(func() {
		err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET)
		orig.Close()
		if err != nil {
			// Leave the thread locked: it dies with the goroutine instead of
			// serving other goroutines from the wrong namespace.
			t.Errorf("labtest.Netns: setns back to the original namespace: %v", err)
			return
		}
		runtime.UnlockOSThread()
	})
	// Without lo up the kernel rejects every IPVS destination with EINVAL.
	if err := LinkUp("lo"); err != nil {
		t.Fatalf("labtest.Netns: bring lo up: %v", err)
	}
}

// LinkUp sets IFF_UP on an interface of the calling thread's namespace
// (tests that manage namespaces themselves bring their lo up with it).
func LinkUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// Result is what a command left behind.
type Result struct {
	Stdout, Stderr string
	// Code is the exit status; for a process killed by a signal it is
	// 128+signal, as a shell reports it.
	Code int
}

// Run runs the program at path with args, stdin as its standard input and
// argv[0] set to the program's base name (so its messages say "ipvsadm", not
// "/usr/sbin/ipvsadm"). It runs from the calling goroutine, so it inherits
// the namespace Netns set up, and with the process environment. The test
// fails if the program cannot be started or runs longer than RunTimeout.
func Run(t testing.TB, stdin string, path string, args ...string) Result {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Args[0] = filepath.Base(path)
	return RunCmd(t, cmd, RunOptions{Stdin: stdin})
}

// longRunTimeout bounds every command started by RunClean: the reference
// restores 11,000 lines in 6 to 9 seconds on an idle host, several times
// that on a busy one.
const longRunTimeout = 10 * time.Minute

// RunClean is Run with only a standard PATH in the environment, as init or
// an admin's clean shell starts a program, and bounded by ten minutes
// (longRunTimeout).
func RunClean(t testing.TB, stdin string, path string, args ...string) Result {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Args[0] = filepath.Base(path)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	return RunCmd(t, cmd, RunOptions{Stdin: stdin, Timeout: longRunTimeout})
}

// Sh runs script with /bin/sh -c (dash in the lab) in the calling
// goroutine's namespace. env entries ("NAME=value") are added to the process
// environment. Failures to start and timeouts fail the test; a non-zero exit
// status is only reported in Result.Code.
func Sh(t testing.TB, script string, env ...string) Result {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	return RunCmd(t, cmd)
}

// RunOptions are how RunCmd runs a command.
type RunOptions struct {
	// Stdin is the standard input; empty means /dev/null.
	Stdin string
	// Timeout bounds the run (RunTimeout if zero): the command's process
	// group is killed and the test fails.
	Timeout time.Duration
	// Start starts the command (cmd.Start if nil), e.g. from a thread in
	// another network namespace.
	Start func(*exec.Cmd) error
}

// RunCmd runs cmd, which the caller has set up (environment, credentials),
// in a process group of its own, and returns what it printed and its
// status. A process killed by a signal reports 128+signal, as a shell does.
// Failures to start and timeouts fail the test; a non-zero status is only
// reported in Result.Code. At most one RunOptions is used.
func RunCmd(t testing.TB, cmd *exec.Cmd, opts ...RunOptions) Result {
	t.Helper()
	var o RunOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Timeout == 0 {
		o.Timeout = RunTimeout
	}
	if o.Start == nil {
		o.Start = (*exec.Cmd).Start
	}
	var stdout, stderr bytes.Buffer
	if o.Stdin != "" {
		cmd.Stdin = strings.NewReader(o.Stdin)
	}
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// Kill the whole process group on timeout: scripts start children.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := o.Start(cmd); err != nil {
		t.Fatalf("start %q: %v", cmd.Args, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("%q: still running after %v; killed (stdout %q, stderr %q)",
			cmd.Args, o.Timeout, stdout.String(), stderr.String())
	}
	res := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		ws, ok := exitErr.Sys().(syscall.WaitStatus)
		if ok && ws.Signaled() {
			res.Code = 128 + int(ws.Signal())
		} else {
			res.Code = exitErr.ExitCode()
		}
	default:
		t.Fatalf("%q: %v", cmd.Args, err)
	}
	return res
}
