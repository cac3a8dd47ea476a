package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestIsLabFile(t *testing.T) {
	dir := t.TempDir()
	for src, want := range map[string]bool{
		"//go:build lab\n\npackage x\n":                        true,
		"// Copyright\n\n//go:build lab && linux\npackage x\n": true,
		"//go:build !lab\n\npackage x\n":                       false,
		"//go:build lab || linux\n\npackage x\n":               false, // built without the tag too
		"package x\n\n//go:build lab\n":                        false, // not a constraint after package
		"package x\n":                                          false,
	} {
		p := filepath.Join(dir, "x_test.go")
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := isLabFile(p); got != want {
			t.Errorf("isLabFile(%q) = %v, want %v", src, got, want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"ipvsadm":     "ipvsadm",
		"-t":          "-t",
		"10.0.0.1:80": "10.0.0.1:80",
		"":            "''",
		"a b":         "'a b'",
		"it's":        `'it'\''s'`,
		"$HOME;rm":    "'$HOME;rm'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestOrderPutsUnknownThenLongestFirst(t *testing.T) {
	pkgs := []*testPkg{{ImportPath: "a"}, {ImportPath: "b"}, {ImportPath: "c"}, {ImportPath: "d"}}
	var got string
	for _, p := range order(pkgs, map[string]float64{"a": 10, "b": 70, "d": 20}) {
		got += p.ImportPath
	}
	if got != "cbda" {
		t.Errorf("order = %s, want cbda", got)
	}
}

func TestTestCountReadsTopLevelResults(t *testing.T) {
	var c testCount
	for _, chunk := range []string{
		"=== RUN   TestA\n--- PA", "SS: TestA (0.01s)\n=== RUN   TestB\n    --- FAIL: TestB/sub (0s)\n",
		"--- FAIL: TestB (0.02s)\n--- SKIP: TestC (0s)\n--- PASS: TestD (0s)", "\nPASS\n",
	} {
		c.feed([]byte(chunk))
	}
	if c.passed != 2 || c.failed != 1 || c.skipped != 1 {
		t.Errorf("counted %d passed, %d failed, %d skipped; want 2, 1, 1", c.passed, c.failed, c.skipped)
	}
}

// TestTestCountKeepsFailedTestsLines: the summary repeats what each failed
// test logged, its subtests' lines under their own names.
func TestTestCountKeepsFailedTestsLines(t *testing.T) {
	var c testCount
	c.feed([]byte("=== RUN   TestA\n    a_test.go:1: fine\n--- PASS: TestA (0s)\n=== RUN   TestB\n=== RUN   TestB/one\n" +
		"    b_test.go:2: one broke\n=== RUN   TestB/two\n    b_test.go:3: two fine\n=== NAME  TestB\n    b_test.go:4: after both\n" +
		"--- FAIL: TestB (0s)\n    --- FAIL: TestB/one (0s)\n    --- PASS: TestB/two (0s)\nFAIL\n"))
	var b strings.Builder
	c.writeFailures(&b, "pkg", true)
	want := "--- lab: pkg TestB failed; its last lines:\n    b_test.go:4: after both\n" +
		"--- lab: pkg TestB/one failed; its last lines:\n    b_test.go:2: one broke\n"
	if b.String() != want {
		t.Errorf("failures:\n%s\nwant:\n%s", b.String(), want)
	}
	for range 2 * keptLines {
		c.feed([]byte("=== RUN   TestC\n"))
	}
	c.current = "TestC"
	for i := range 2 * keptLines {
		c.feed([]byte(fmt.Sprintf("    c_test.go:%d: x\n", i)))
	}
	if l := c.logs["TestC"]; len(l) != keptLines || !strings.Contains(l[len(l)-1], fmt.Sprint(2*keptLines-1)) {
		t.Errorf("TestC kept %d lines, the last %q; want the last %d", len(l), l[len(l)-1], keptLines)
	}
}

// TestTestCountTailsAPackageThatFailedOutsideTests: a binary that died
// (the test timeout's panic) prints the package's own last lines; a test
// that failed in several -count runs is shown once.
func TestTestCountTailsAPackageThatFailedOutsideTests(t *testing.T) {
	var c testCount
	c.feed([]byte("=== RUN   TestA\n    a_test.go:1: waiting\n"))
	for i := range 2 * keptLines {
		c.feed([]byte(fmt.Sprintf("goroutine %d [running]:\n", i)))
	}
	c.feed([]byte("panic: test timed out after 10m0s\n"))
	var b strings.Builder
	c.writeFailures(&b, "pkg", true)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != keptLines+1 || lines[0] != "--- lab: pkg failed; its last lines:" || lines[keptLines] != "panic: test timed out after 10m0s" {
		t.Errorf("failures of a package that panicked (%d lines):\n%s", len(lines), b.String())
	}
	b.Reset()
	c.writeFailures(&b, "pkg", false)
	if b.Len() != 0 {
		t.Errorf("a package that passed prints %q", b.String())
	}

	var d testCount
	for range 3 {
		d.feed([]byte("=== RUN   TestB\n    b_test.go:2: broke\n--- FAIL: TestB (0s)\n"))
	}
	b.Reset()
	d.writeFailures(&b, "pkg", true)
	if n := strings.Count(b.String(), "--- lab: pkg TestB failed"); n != 1 {
		t.Errorf("TestB, failed in 3 runs, shown %d times:\n%s", n, b.String())
	}
}

func TestTestFuncsFollowsGoTestRule(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x_lab_test.go")
	src := `//go:build lab

package x

import "testing"

func TestMain(m *testing.M) {}
func TestA(t *testing.T)    {}
func Test(t *testing.T)     {}
func Testlower(t *testing.T) {}
func TestÄ(t *testing.T)    {}
func helper(t *testing.T)   {}
func BenchmarkB(b *testing.B) {}
type s struct{}
func (s) TestM(t *testing.T) {}
`
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := testFuncs(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "TestA Test TestÄ" {
		t.Errorf("testFuncs = %v", got)
	}
}

func TestRunPatternSelectsLabTests(t *testing.T) {
	tests := []string{"TestNetns", "TestNetnsLo", "TestHeader"}
	for _, c := range []struct {
		user, want string
		ok         bool
	}{
		{"", "^(TestNetns|TestNetnsLo|TestHeader)$", true},
		{"Netns", "^(TestNetns|TestNetnsLo)$", true},
		{"TestNetns$/first", "^(TestNetns)$/first", true},
		{"(Header|Lo)$", "^(TestNetnsLo|TestHeader)$", true},
		{"[/]x", "", false},
		{"Nothing", "", false},
	} {
		got, ok, err := runPattern(tests, c.user)
		if err != nil || got != c.want || ok != c.ok {
			t.Errorf("runPattern(%q) = %q, %v, %v; want %q, %v", c.user, got, ok, err, c.want, c.ok)
		}
	}
	if _, _, err := runPattern(tests, "("); err == nil {
		t.Error("a bad -run pattern is not an error")
	}
}

// TestCheckBinArchRefusesForeignPrograms: a bin/ built for the host is
// refused for an arm64 guest and taken for an amd64 one; files that are
// not programs are ignored.
func TestCheckBinArchRefusesForeignPrograms(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Fatalf("the lab runs on amd64 hosts; this is %s", runtime.GOARCH)
	}
	dir := t.TempDir()
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ipvsadm"), self, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkBinArch(dir, "amd64"); err != nil {
		t.Errorf("amd64 programs for an amd64 guest: %v", err)
	}
	err = checkBinArch(dir, "arm64")
	if err == nil || !strings.Contains(err.Error(), "EM_X86_64") || !strings.Contains(err.Error(), "make lab ARCH=arm64") {
		t.Errorf("amd64 programs for an arm64 guest: %v", err)
	}
}
