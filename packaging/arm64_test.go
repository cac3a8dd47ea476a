package packaging_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lvskit/lvskit/packaging/hosttool"
)

// buildFor builds the five programs for linux/goarch into a new directory,
// as the Makefile's pkg-bin does (static, -trimpath).
func buildFor(t *testing.T, goarch string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", dir+"/", "./cmd/...")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build for %s: %v\n%s", goarch, err, out)
	}
	return dir
}

// TestArm64ProgramsUnderQemuUser runs the arm64 build of each program under
// qemu-aarch64-static on this host and the host's own build beside it: the
// same invocations (--version, --help, command lines and restore input the
// parsers refuse) give the same output and status, byte for byte. The
// host has no IPVS, so both reach the kernel only to be told so (ipvsadm,
// like Debian's, opens the kernel interface before it reads its command
// line); the parsers' own tests run under qemu-user in make unit-arm64,
// and the arm64 lab (make lab-arm64) proves the rest on Debian's arm64
// kernel.
func TestArm64ProgramsUnderQemuUser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the programs for two architectures: run without -short")
	}
	t.Parallel()
	qemu := hosttool.Require(t, "qemu-aarch64-static", "qemu-user-static")
	var host, arm string
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); host = buildFor(t, "amd64") }()
	go func() { defer wg.Done(); arm = buildFor(t, "arm64") }()
	wg.Wait()
	if t.Failed() {
		return
	}
	cases := []struct {
		prog  string
		stdin string
		args  []string
		code  int // the status both must exit with
	}{
		{"ipvsadm", "", []string{"--version"}, 2},
		{"ipvsadm", "", []string{"--help"}, 2},
		{"ipvsadm", "", []string{"-A", "-t", "300.1.1.1:80"}, 2},
		{"ipvsadm", "", []string{"-A", "-t", "10.0.0.1:80", "-s", "nope"}, 2},
		{"ipvsadm", "", []string{"--bogus"}, 2},
		{"ipvsadm-save", "", []string{"--version"}, 1},
		{"ipvsadm-save", "", []string{"-x"}, 1},
		{"ipvsadm-restore", "-A -t 10.0.0.1:80 -s nope\n", nil, 2},
		{"ipvsadm-restore", "-A -t 10.0.0.1:80\n-a -t 10.0.0.1:80 -r 10.1.0.1:80 -w -3\n", nil, 1},
		{"lvsprep", "", []string{"--version"}, 0},
		{"lvsprep", "", []string{"--help"}, 0},
		{"lvsprep", "", []string{"bogus"}, 2},
		{"lvsctl", "", []string{"--version"}, 0},
		{"lvsctl", "", []string{"--help"}, 0},
		{"lvsctl", "", []string{"bogus"}, 2},
	}
	for _, c := range cases {
		name := c.prog + " " + strings.Join(c.args, " ")
		if c.stdin != "" {
			name += " < " + strings.TrimSpace(strings.ReplaceAll(c.stdin, "\n", "; "))
		}
		want := runIn(t, c.stdin, "", filepath.Join(host, c.prog), c.prog, c.args...)
		got := runIn(t, c.stdin, qemu, filepath.Join(arm, c.prog), c.prog, c.args...)
		// qemu-user refuses generic netlink sockets itself, with
		// EPROTONOSUPPORT; the host kernel, without IPVS, answers
		// ENOPROTOOPT. The rest of the message is the program's.
		got.stderr = strings.ReplaceAll(got.stderr, "Protocol not supported", "Protocol not available")
		if got != want {
			t.Errorf("%s:\narm64 under qemu: %+v\nhost:             %+v", name, got, want)
		}
		if want.status != c.code {
			t.Errorf("%s: status %d, want %d (%+v)", name, want.status, c.code, want)
		}
		if want.stdout == "" && want.stderr == "" {
			t.Errorf("%s: no output at all", name)
		}
	}
}

// runIn runs prog as argv0 with args (under emulator, if given: qemu's -0
// sets argv[0]) and stdin.
func runIn(t *testing.T, stdin, emulator, prog, argv0 string, args ...string) result {
	t.Helper()
	var cmd *exec.Cmd
	if emulator != "" {
		cmd = exec.Command(emulator, append([]string{"-0", argv0, prog}, args...)...)
	} else {
		cmd = exec.Command(prog, args...)
		cmd.Args[0] = argv0
	}
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.status = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", prog, err)
	}
	return r
}
