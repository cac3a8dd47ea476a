package hosttool_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMakefileLabTargetsNameTests: every Makefile target that runs named
// lab tests (demo, bench, soak, soak-lvsprep) names tests that exist in
// the packages it lists. Tests move between packages and get longer
// names; a target that then runs nothing would still "pass".
func TestMakefileLabTargetsNameTests(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	src := strings.ReplaceAll(string(b), "\\\n", " ")
	src = strings.ReplaceAll(src, "$(BENCH_RUN)", regexp.MustCompile(`(?m)^BENCH_RUN \?= (.*)$`).FindStringSubmatch(src)[1])
	src = strings.ReplaceAll(src, "$$", "$")
	line := regexp.MustCompile(`\$\(LABRUN\) -tests [^\n]*-run '?([^' ]+)'? ([^\n;]*)`)
	testFunc := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	checked := 0
	for _, m := range line.FindAllStringSubmatch(src, -1) {
		// TestDifferential/^(a|b)$ runs the corpus files a and b: each
		// must be a file of the package's differential corpus.
		run, sub, _ := strings.Cut(m[1], "/")
		var dirs []string
		for _, f := range strings.Fields(m[2]) {
			if strings.HasPrefix(f, "./") {
				dirs = append(dirs, f)
			}
		}
		if len(dirs) == 0 {
			t.Errorf("Makefile: -run %s names no package", run)
			continue
		}
		if sub != "" {
			g := regexp.MustCompile(`^\^\((.*)\)\$$`).FindStringSubmatch(sub)
			if g == nil {
				t.Errorf("Makefile: -run %s/%s: the subtest pattern is not ^(a|b|...)$", run, sub)
				continue
			}
			for _, f := range strings.Split(g[1], "|") {
				found := false
				for _, d := range dirs {
					_, err := os.Stat(filepath.Join("../..", d, "differential", f+".txt"))
					found = found || err == nil
				}
				if !found {
					t.Errorf("Makefile: -run %s/%s: no corpus file %s.txt in %v", run, sub, f, dirs)
				}
				checked++
			}
		}
		var tests []string
		for _, d := range dirs {
			files, err := filepath.Glob(filepath.Join("../..", d, "*_test.go"))
			if err != nil || len(files) == 0 {
				t.Errorf("Makefile: -run %s: package %s has no tests", run, d)
				continue
			}
			for _, f := range files {
				src, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, tm := range testFunc.FindAllStringSubmatch(string(src), -1) {
					tests = append(tests, tm[1])
				}
			}
		}
		alts := []string{run}
		if g := regexp.MustCompile(`^\^\((.*)\)\$$`).FindStringSubmatch(run); g != nil {
			alts = nil
			for _, a := range strings.Split(g[1], "|") {
				alts = append(alts, "^"+a+"$")
			}
		}
		for _, a := range alts {
			re, err := regexp.Compile(a)
			if err != nil {
				t.Errorf("Makefile: -run %s: %v", run, err)
				continue
			}
			found := false
			for _, name := range tests {
				found = found || re.MatchString(name)
			}
			if !found {
				t.Errorf("Makefile: -run %s: %s matches no test in %v", run, a, dirs)
			}
			checked++
		}
	}
	if checked < 5 {
		t.Errorf("checked only %d test names in the Makefile; has the pattern drifted?", checked)
	}
}
