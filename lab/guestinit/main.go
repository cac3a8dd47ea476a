//go:build linux

// Command guestinit is /init of the lab VM: PID 1 in the guest. It mounts
// the pseudo file systems, loads the kernel modules the lab needs, runs the
// steps of the plan the host packed into the initramfs, and sends every
// step's output and exit status back over the results serial port (ttyS1)
// before it powers the VM off.
//
// The host builds it (static, CGO_ENABLED=0) and packs it into every run's
// initramfs overlay; it is not useful anywhere else.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/lab/internal/wire"
)

// basePath is the guest's default PATH: system directories only, so tests
// say explicitly when they mean our binaries (steps may override it).
const basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// results is the raw results channel; writes from the step copiers are
// serialised so records never interleave.
type results struct {
	mu sync.Mutex
	f  *os.File
}

func (r *results) record(kind string, fields ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = wire.WriteRecord(r.f, kind, fields...)
}

func (r *results) data(kind string, step int, p []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = wire.WriteData(r.f, kind, step, p)
}

// drain waits until the UART has sent everything, so nothing is lost when
// the VM powers off right after.
func (r *results) drain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = unix.IoctlSetInt(int(r.f.Fd()), unix.TCSBRK, 1)
}

func main() {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "guestinit: this is the lab VM's /init; it only runs as PID 1 inside the VM")
		os.Exit(2)
	}
	mountAll()
	res, err := openResults("/dev/ttyS1")
	if err != nil {
		// Without the results channel the host cannot hear us; say it on
		// the console (the host shows the console's tail) and stop.
		fmt.Fprintf(os.Stderr, "guestinit: %v\n", err)
		powerOff()
	}
	res.record(wire.KindInit, uptime())
	defer func() {
		if p := recover(); p != nil {
			res.record(wire.KindFatal, oneLine(fmt.Sprintf("guestinit panic: %v", p)))
		}
		res.drain()
		powerOff()
	}()
	if err := run(res); err != nil {
		res.record(wire.KindFatal, oneLine(err.Error()))
		return
	}
	res.record(wire.KindDone)
}

func run(res *results) error {
	initUp := uptime()
	start := time.Now()
	if err := loadModules(res); err != nil {
		return err
	}
	modMS := time.Since(start).Milliseconds()
	if err := setupSystem(); err != nil {
		return err
	}
	plan, err := readPlan()
	if err != nil {
		return err
	}
	res.record(wire.KindReady, initUp, uptime(), strconv.FormatInt(modMS, 10))
	if !plan.Interactive {
		for i, step := range plan.Steps {
			runStep(res, i, step)
		}
		return nil
	}
	cmds := bufio.NewReader(res.f)
	for {
		line, err := cmds.ReadString('\n')
		if err != nil {
			return fmt.Errorf("read the host's next command: %w", err)
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 1 && f[0] == wire.CmdDone:
			return nil
		case len(f) == 2 && f[0] == wire.CmdRun:
			i, err := strconv.Atoi(f[1])
			if err != nil || i < 0 || i >= len(plan.Steps) {
				return fmt.Errorf("bad step in host command %q", line)
			}
			runStep(res, i, plan.Steps[i])
		default:
			return fmt.Errorf("unknown host command %q", line)
		}
	}
}

func mountAll() {
	for _, m := range []struct{ src, dst, fstype string }{
		{"proc", "/proc", "proc"},
		{"sysfs", "/sys", "sysfs"},
		{"devtmpfs", "/dev", "devtmpfs"},
		{"devpts", "/dev/pts", "devpts"},
		{"tmpfs", "/dev/shm", "tmpfs"},
		{"tmpfs", "/tmp", "tmpfs"},
		{"tmpfs", "/run", "tmpfs"},
	} {
		_ = os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.fstype, 0, ""); err != nil {
			fmt.Fprintf(os.Stderr, "guestinit: mount %s: %v\n", m.dst, err)
		}
	}
	// Go spells the sticky bit os.ModeSticky (0o1000 is not it).
	_ = os.Chmod("/tmp", 0o777|os.ModeSticky)
	// The initramfs root comes writable by all; a real root is not, and
	// programs that check who may write above a file (lvsctl's exec
	// checks, keepalived's script security) must see a real one.
	_ = os.Chmod("/", 0o755)
	// BIRD's default control socket (/run/bird/bird.ctl as Debian builds
	// it) lives here; the Debian package makes the directory at boot too.
	_ = os.MkdirAll("/run/bird", 0o755)
}

func openResults(path string) (*results, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("open results port: %w", err)
	}
	// Raw mode: no CRLF translation, no echo, 8 bits clean.
	t, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err != nil {
		return nil, fmt.Errorf("results port termios: %w", err)
	}
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON | unix.IXOFF
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB | unix.CBAUD
	t.Cflag |= unix.CS8 | unix.CLOCAL | unix.B115200
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(int(f.Fd()), unix.TCSETS, t); err != nil {
		return nil, fmt.Errorf("results port raw mode: %w", err)
	}
	return &results{f: f}, nil
}

// loadModules loads the modules listed in wire.ModulesPath in order. Lines
// starting with "?" are optional (CPU-specific helpers the emulated CPU may
// not support); any other failure is fatal, because tests would then fail
// for reasons that have nothing to do with the code under test.
func loadModules(res *results) error {
	f, err := os.Open(wire.ModulesPath)
	if err != nil {
		return fmt.Errorf("module list: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		optional := strings.HasPrefix(line, "?")
		line = strings.TrimPrefix(line, "?")
		path, params, _ := strings.Cut(line, " ")
		err := insmod(path, params)
		switch {
		case err == nil, errors.Is(err, unix.EEXIST):
		case optional:
			res.record(wire.KindNote, "optional module", path, "not loaded:", err.Error())
		default:
			return fmt.Errorf("load module %s: %w", path, err)
		}
	}
	return sc.Err()
}

func insmod(path, params string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.FinitModule(int(f.Fd()), params, 0)
}

func setupSystem() error {
	if err := unix.Sethostname([]byte("lab")); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	_ = os.Symlink("/proc/self/mounts", "/etc/mtab")
	// The initial namespace gets lo up like a booted host; tests make their
	// own namespaces (labtest.Netns) and bring lo up there themselves.
	out, err := exec.Command("/usr/bin/ip", "link", "set", "lo", "up").CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip link set lo up: %v: %s", err, out)
	}
	return nil
}

func readPlan() (*wire.Plan, error) {
	b, err := os.ReadFile(wire.PlanPath)
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	var p wire.Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("parse plan: %w", err)
	}
	return &p, nil
}

// runStep runs one step, streaming its output, and always sends its end
// record: a step that cannot start ends with status 127 like in a shell.
func runStep(res *results, i int, st wire.Step) {
	idx := strconv.Itoa(i)
	res.record(wire.KindBegin, idx)
	start := time.Now()
	code, how := execStep(res, i, st)
	res.record(wire.KindEnd, idx, strconv.Itoa(code), strconv.FormatInt(time.Since(start).Milliseconds(), 10), how)
}

func execStep(res *results, i int, st wire.Step) (code int, how string) {
	if len(st.Argv) == 0 {
		res.data(wire.KindErr, i, []byte("guestinit: empty step\n"))
		return 127, "ok"
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		res.data(wire.KindErr, i, []byte("guestinit: "+err.Error()+"\n"))
		return 127, "ok"
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		res.data(wire.KindErr, i, []byte("guestinit: "+err.Error()+"\n"))
		return 127, "ok"
	}
	cmd := &exec.Cmd{
		Path:        st.Argv[0],
		Args:        st.Argv,
		Dir:         st.Dir,
		Env:         environ(st.Env),
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	var copiers sync.WaitGroup
	copyOut := func(r *os.File, kind string) {
		defer copiers.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				res.data(kind, i, buf[:n])
			}
			if err != nil {
				return
			}
		}
	}
	copiers.Add(2)
	go copyOut(outR, wire.KindOut)
	go copyOut(errR, wire.KindErr)
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		copiers.Wait()
		outR.Close()
		errR.Close()
		res.data(wire.KindErr, i, []byte("guestinit: "+err.Error()+"\n"))
		return 127, "ok"
	}
	how = "ok"
	timeout := time.Duration(st.TimeoutSec) * time.Second
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	var mu sync.Mutex
	timer := time.AfterFunc(timeout, func() {
		mu.Lock()
		how = "timeout"
		mu.Unlock()
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGQUIT) // Go programs dump goroutines
		time.Sleep(2 * time.Second)
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
	})
	err = cmd.Wait()
	timer.Stop()
	// Leftover members of the step's process group would hold the pipes
	// open (and the next step must start clean).
	_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
	waited := make(chan struct{})
	go func() { copiers.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		res.record(wire.KindNote, "step", strconv.Itoa(i), "left processes holding its output open")
	}
	outR.Close()
	errR.Close()
	mu.Lock()
	defer mu.Unlock()
	return exitCode(err), how
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 127
}

// environ is the guest's base environment with the step's entries added
// (same-name entries replace the base ones).
func environ(extra []string) []string {
	env := []string{
		"PATH=" + basePath,
		"HOME=/root",
		"TERM=dumb",
		"TMPDIR=/tmp",
		"LVSKIT_LAB=1",
	}
	for _, kv := range extra {
		name, _, _ := strings.Cut(kv, "=")
		replaced := false
		for j, old := range env {
			if strings.HasPrefix(old, name+"=") {
				env[j] = kv
				replaced = true
			}
		}
		if !replaced {
			env = append(env, kv)
		}
	}
	return env
}

func uptime() string {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return "?"
	}
	up, _, _ := strings.Cut(string(b), " ")
	return up
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func powerOff() {
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	// Reboot only returns on failure; PID 1 must not exit (kernel panic),
	// though with panic=-1 and -no-reboot that also ends the VM.
	for {
		_, _ = io.WriteString(os.Stderr, "guestinit: power off failed\n")
		time.Sleep(time.Hour)
	}
}
