// Package hosttool finds the host programs that the documentation and
// packaging tests drive (shells, groff, man, dpkg, lintian, ...). A missing
// program is installed from the host's Debian archive with apt-get when the
// test runs as root; otherwise the test fails. The tests never skip: a
// check that cannot run is a failure.
package hosttool

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// aptMu serialises apt-get runs of tests in one process; dpkg's own lock
// handles separate processes.
var aptMu sync.Mutex

// Require returns the path of program, installing Debian package pkg when the
// program is not on PATH (root only). It fails t when the program cannot be
// found or installed.
func Require(t testing.TB, program, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(program); err == nil {
		return p
	}
	if os.Geteuid() != 0 {
		t.Fatalf("%s not found; install the Debian package %s (the test installs it itself only when run as root)", program, pkg)
	}
	Install(t, pkg)
	p, err := exec.LookPath(program)
	if err != nil {
		t.Fatalf("%s still not found after installing %s: %v", program, pkg, err)
	}
	return p
}

// RequireFile is Require for packages that provide a file rather than a
// program (bash-completion's bash_completion script, for example).
func RequireFile(t testing.TB, path, pkg string) string {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if os.Geteuid() != 0 {
		t.Fatalf("%s not found; install the Debian package %s", path, pkg)
	}
	Install(t, pkg)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s still missing after installing %s: %v", path, pkg, err)
	}
	return path
}

// Install installs Debian packages with apt-get (updating the package lists
// once if the first attempt fails).
func Install(t testing.TB, pkgs ...string) {
	t.Helper()
	aptMu.Lock()
	defer aptMu.Unlock()
	install := func() ([]byte, error) {
		cmd := exec.Command("apt-get", append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd.CombinedOutput()
	}
	if _, err := install(); err == nil {
		return
	}
	if out, err := exec.Command("apt-get", "update").CombinedOutput(); err != nil {
		t.Fatalf("apt-get update: %v\n%s", err, out)
	}
	if out, err := install(); err != nil {
		t.Fatalf("apt-get install %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
}
