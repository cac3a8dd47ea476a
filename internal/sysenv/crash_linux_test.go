package sysenv

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSegfault runs the test binary again as a process that calls
// DieOfSegfault, and checks that it was killed by SIGSEGV (what a shell
// reports as status 139 with "Segmentation fault"), not that it exited.
func TestSegfault(t *testing.T) {
	if os.Getenv("LVSKIT_DIE_OF_SEGFAULT") == "1" {
		// No core file in the source tree, whatever the limits are.
		unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
		DieOfSegfault()
		t.Fatal("still alive")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSegfault$")
	cmd.Env = append(os.Environ(), "LVSKIT_DIE_OF_SEGFAULT=1")
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("process ended with %v: %s", err, out)
	}
	ws := exitErr.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGSEGV {
		t.Fatalf("wait status %v, want killed by SIGSEGV; output: %s", ws, out)
	}
	if len(out) != 0 {
		t.Errorf("the process printed %q", out)
	}
}
