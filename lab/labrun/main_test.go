package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lvskit/lvskit/lab/vm"
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
	c := testCount{now: func() time.Time { return time.Date(2026, 12, 7, 7, 6, 17, 120e6, time.UTC) }}
	c.feed([]byte("=== RUN   TestA\n    a_test.go:1: fine\n--- PASS: TestA (0s)\n=== RUN   TestB\n=== RUN   TestB/one\n" +
		"    b_test.go:2: one broke\n=== RUN   TestB/two\n    b_test.go:3: two fine\n=== NAME  TestB\n    b_test.go:4: after both\n" +
		"--- FAIL: TestB (0s)\n    --- FAIL: TestB/one (0s)\n    --- PASS: TestB/two (0s)\nFAIL\n"))
	var b strings.Builder
	c.writeFailures(&b, "pkg", true, nil)
	ran := "    lab: ran 07:06:17.120–07:06:17.120 (host time)\n"
	want := "--- lab: pkg TestB failed; its last lines:\n" + ran + "    b_test.go:4: after both\n" +
		"--- lab: pkg TestB/one failed; its last lines:\n" + ran + "    b_test.go:2: one broke\n"
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
	c.writeFailures(&b, "pkg", true, nil)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != keptLines+2 || lines[0] != "--- lab: pkg failed; its last lines:" || !strings.HasPrefix(lines[1], "    lab: ran ") ||
		lines[keptLines+1] != "panic: test timed out after 10m0s" {
		t.Errorf("failures of a package that panicked (%d lines):\n%s", len(lines), b.String())
	}
	b.Reset()
	c.writeFailures(&b, "pkg", false, nil)
	if b.Len() != 0 {
		t.Errorf("a package that passed prints %q", b.String())
	}

	var d testCount
	for range 3 {
		d.feed([]byte("=== RUN   TestB\n    b_test.go:2: broke\n--- FAIL: TestB (0s)\n"))
	}
	b.Reset()
	d.writeFailures(&b, "pkg", true, nil)
	if n := strings.Count(b.String(), "--- lab: pkg TestB failed"); n != 1 {
		t.Errorf("TestB, failed in 3 runs, shown %d times:\n%s", n, b.String())
	}
}

// hostTime is 07:MM:SS.mmm of a fixed day, in host time.
func hostTime(min, sec, ms int) time.Time {
	return time.Date(2026, 12, 7, 7, min, sec, ms*1e6, time.UTC)
}

// TestFailuresShowTheHostsWaits: each failed test's lines start with its
// span from its === RUN line to its result line, as the output came, and
// the host's waiting windows that overlap it.
func TestFailuresShowTheHostsWaits(t *testing.T) {
	var clock time.Time
	c := testCount{now: func() time.Time { return clock }}
	for _, chunk := range []struct {
		at   time.Time
		text string
	}{
		{hostTime(6, 17, 120), "=== RUN   TestA\n"},
		{hostTime(6, 30, 0), "    a_test.go:1: fine\n--- PASS: TestA (13s)\n=== RUN   Te"},
		{hostTime(6, 30, 5), "stB\n    b_test.go:5: waiting\n"},
		{hostTime(7, 7, 10), "    b_test.go:9: timed out\n--- FAIL: TestB (37s)\n=== RUN   TestC\n"},
		{hostTime(7, 9, 500), "    c_test.go:1: broke\n--- FAIL: TestC (2s)\n=== RUN   TestD\n"},
		{hostTime(7, 30, 0), "    d_test.go:1: broke\n--- FAIL: TestD (20s)\nFAIL\n"},
	} {
		clock = chunk.at
		c.feed([]byte(chunk.text))
	}
	host := &vm.HostWaits{Windows: []vm.Wait{
		{Start: hostTime(6, 20, 0), End: hostTime(6, 21, 0), Waited: 900 * time.Millisecond, Load: 3},
		{Start: hostTime(6, 49, 800), End: hostTime(6, 53, 200), Waited: 2900 * time.Millisecond, Load: 7.9},
		{Start: hostTime(7, 5, 0), End: hostTime(7, 8, 0), Waited: 2500 * time.Millisecond, Load: -1},
	}, Count: 3}
	var b strings.Builder
	c.writeFailures(&b, "pkg", true, host)
	want := "--- lab: pkg TestB failed; its last lines:\n" +
		"    lab: ran 07:06:30.005–07:07:07.010 (host time); the host kept the VM's CPU waiting in it: " +
		"07:06:49.80 for 3.4 s (waited 2.9 s, load 7.9); 07:07:05.00 for 3.0 s (waited 2.5 s)\n" +
		"    b_test.go:5: waiting\n    b_test.go:9: timed out\n" +
		"--- lab: pkg TestC failed; its last lines:\n" +
		"    lab: ran 07:07:07.010–07:07:09.500 (host time); the host kept the VM's CPU waiting in it: 07:07:05.00 for 3.0 s (waited 2.5 s)\n" +
		"    c_test.go:1: broke\n" +
		"--- lab: pkg TestD failed; its last lines:\n" +
		"    lab: ran 07:07:09.500–07:07:30.000 (host time); the host never kept the VM's CPU waiting 0.5 s or more in it\n" +
		"    d_test.go:1: broke\n"
	if b.String() != want {
		t.Errorf("failures:\n%s\nwant:\n%s", b.String(), want)
	}

	// Sampling that broke: the windows up to then, and until when.
	host.Err, host.Until = errors.New("bad schedstat"), hostTime(7, 0, 0)
	if got, want := ranLine(c.failedSpans["TestD"], host), "ran 07:07:09.500–07:07:30.000 (host time); "+
		"the host never kept the VM's CPU waiting 0.5 s or more in it (known until 07:07:00.00 only: bad schedstat)"; got != want {
		t.Errorf("after sampling broke:\n%s\nwant:\n%s", got, want)
	}
	host.Until = time.Time{}
	if got := ranLine(c.failedSpans["TestD"], host); !strings.HasSuffix(got, "; whether the host kept the VM's CPU waiting is not known (bad schedstat)") {
		t.Errorf("never sampled: %s", got)
	}
}

// TestPackageFailureSpansItsStep: a package that failed outside its tests
// ran from its step's start to its end, or to its VM's end if it has none.
func TestPackageFailureSpansItsStep(t *testing.T) {
	var clock time.Time
	c := testCount{now: func() time.Time { return clock }}
	clock = hostTime(20, 0, 0)
	c.stepBegan()
	clock = hostTime(20, 1, 0)
	c.feed([]byte("=== RUN   TestA\n    a_test.go:1: waiting\n"))
	clock = hostTime(30, 1, 0)
	c.feed([]byte("panic: test timed out after 10m0s\n"))
	host := &vm.HostWaits{Windows: []vm.Wait{
		{Start: hostTime(25, 0, 0), End: hostTime(25, 2, 0), Waited: 1900 * time.Millisecond, Load: 9.25},
		{Start: hostTime(31, 0, 0), End: hostTime(31, 2, 0), Waited: 1500 * time.Millisecond, Load: 9.25},
	}, Count: 2}
	var b strings.Builder
	c.writeFailures(&b, "pkg", true, host)
	want := "--- lab: pkg failed; its last lines:\n    lab: ran from 07:20:00.000 (host time); the host kept the VM's CPU waiting in it: " +
		"07:25:00.00 for 2.0 s (waited 1.9 s, load 9.2); 07:31:00.00 for 2.0 s (waited 1.5 s, load 9.2)\n"
	if !strings.HasPrefix(b.String(), want) {
		t.Errorf("a package that died:\n%s\nwant it to start:\n%s", b.String(), want)
	}
	clock = hostTime(30, 2, 0)
	c.stepEnded()
	b.Reset()
	c.writeFailures(&b, "pkg", true, host)
	want = "--- lab: pkg failed; its last lines:\n    lab: ran 07:20:00.000–07:30:02.000 (host time); the host kept the VM's CPU waiting in it: " +
		"07:25:00.00 for 2.0 s (waited 1.9 s, load 9.2)\n"
	if !strings.HasPrefix(b.String(), want) {
		t.Errorf("a package that timed out:\n%s\nwant it to start:\n%s", b.String(), want)
	}
}

// TestFailuresListAFewWaits: a test with many windows in it lists five and
// counts the rest; a span past the kept windows says some were not kept.
func TestFailuresListAFewWaits(t *testing.T) {
	h := &vm.HostWaits{Count: 9}
	for i := range 7 {
		start := hostTime(10, 2*i, 0)
		h.Windows = append(h.Windows, vm.Wait{Start: start, End: start.Add(time.Second), Waited: time.Second, Load: 2})
	}
	got := ranLine(span{hostTime(10, 0, 0), hostTime(11, 0, 0)}, h)
	if strings.Count(got, " for 1.0 s (waited 1.0 s, load 2.0)") != 5 ||
		!strings.HasSuffix(got, "07:10:08.00 for 1.0 s (waited 1.0 s, load 2.0); and 2 more (7.0 s waited in all) (windows after the first 7 were not kept)") {
		t.Errorf("many windows: %s", got)
	}
}

func TestVMWaitsLine(t *testing.T) {
	longest := vm.Wait{Start: hostTime(6, 49, 800), End: hostTime(6, 53, 200), Waited: 2900 * time.Millisecond, Load: 7.9}
	for _, c := range []struct {
		h    vm.HostWaits
		want string
	}{
		{vm.HostWaits{Until: hostTime(9, 0, 0)}, "the host never kept its CPU waiting 0.5 s or more"},
		{vm.HostWaits{Count: 3, Total: 7200 * time.Millisecond, Longest: longest, Windows: []vm.Wait{longest}},
			"the host kept its CPU waiting 0.5 s or more 3 time(s), 7.2 s in all; the longest 07:06:49.80 for 3.4 s (waited 2.9 s, load 7.9)"},
		{vm.HostWaits{Err: errors.New("permission denied"), Until: hostTime(1, 2, 300)},
			"the host never kept its CPU waiting 0.5 s or more (known until 07:01:02.30 only: permission denied)"},
		{vm.HostWaits{Err: errors.New("permission denied")}, "whether the host kept its CPU waiting is not known (permission denied)"},
	} {
		if got := vmWaitsLine(&c.h); got != c.want {
			t.Errorf("vmWaitsLine = %s\nwant          %s", got, c.want)
		}
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
