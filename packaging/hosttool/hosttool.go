// Package hosttool finds the host programs that docs and packaging tests
// drive.
//
// They are shells, groff, man, dpkg, lintian and the like. Tests never
// install anything: `make deps` installs every Debian package the suite
// needs, once, before any test runs. A missing program fails the test with
// the command that installs it; the tests never skip.
package hosttool

import (
	"os"
	"os/exec"
	"testing"
)

// Require returns the path of program, and fails t when it is not on PATH,
// naming the Debian package pkg that provides it.
func Require(t testing.TB, program, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(program)
	if err != nil {
		t.Fatalf("%s not found: %s", program, installHint(pkg))
	}
	return p
}

// RequireFile is Require for packages that provide a file rather than a
// program (bash-completion's bash_completion script, for example).
func RequireFile(t testing.TB, path, pkg string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s not found: %s", path, installHint(pkg))
	}
	return path
}

// RequirePackage fails t unless dpkg lists the Debian package pkg as
// installed (for tests that compare with a package's own files).
func RequirePackage(t testing.TB, pkg string) {
	t.Helper()
	out, err := exec.Command("dpkg-query", "-W", "-f", "${db:Status-Abbrev}", pkg).Output()
	if err != nil || len(out) < 2 || string(out[:2]) != "ii" {
		t.Fatalf("the Debian package %s is not installed: %s", pkg, installHint(pkg))
	}
}

func installHint(pkg string) string {
	return "run `make deps` as root (it installs every package the tests need), or: apt-get install " + pkg
}
