package main

// Finding the lab tests: packages, their test functions, the -run pattern.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// selectTests finds the packages matching patterns that have lab tests and
// sets each one's -test.run pattern, narrowed by the user's -run pattern
// run. With nothing to run it says why and returns nil and the exit status.
func selectTests(root string, patterns []string, run string) ([]*testPkg, int) {
	pkgs, err := findLabPackages(root, patterns)
	if err != nil {
		fmt.Fprintf(os.Stderr, "labrun: %v\n", err)
		return nil, exitHarness
	}
	if len(pkgs) == 0 {
		fmt.Fprintf(os.Stderr, "labrun: no package in %s has lab tests (files with //go:build lab)\n", strings.Join(patterns, " "))
		return nil, exitFail
	}
	var matched []*testPkg
	for _, p := range pkgs {
		pattern, ok, err := runPattern(p.tests, run)
		if err != nil {
			fmt.Fprintf(os.Stderr, "labrun: %v\n", err)
			return nil, exitUsage
		}
		if ok {
			p.run = pattern
			matched = append(matched, p)
		}
	}
	if len(matched) == 0 {
		fmt.Fprintf(os.Stderr, "labrun: no lab test in %s matches -run %q\n", strings.Join(patterns, " "), run)
		return nil, exitFail
	}
	return matched, 0
}

// findLabPackages lists the packages matching patterns that have test files
// built only with the lab tag.
func findLabPackages(root string, patterns []string) ([]*testPkg, error) {
	cmd := exec.Command(goCmd(), append([]string{"list", "-e", "-tags", "lab", "-json=ImportPath,Dir,TestGoFiles,XTestGoFiles,Module"}, patterns...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	var pkgs []*testPkg
	for dec.More() {
		var p struct {
			ImportPath, Dir           string
			TestGoFiles, XTestGoFiles []string
		}
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		lab := false
		var tests []string
		for _, f := range append(p.TestGoFiles, p.XTestGoFiles...) {
			path := filepath.Join(p.Dir, f)
			if !isLabFile(path) {
				continue
			}
			lab = true
			names, err := testFuncs(path)
			if err != nil {
				return nil, err
			}
			tests = append(tests, names...)
		}
		if !lab {
			continue
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		sort.Strings(tests)
		pkgs = append(pkgs, &testPkg{ImportPath: p.ImportPath, Dir: p.Dir, rel: filepath.ToSlash(rel), tests: tests})
	}
	return pkgs, nil
}

// testFuncs returns the names of the test functions a file declares, by
// the go test rule: TestXxx where Xxx does not start with a lower-case
// letter, taking one parameter.
func testFuncs(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Type.Params == nil || len(fn.Type.Params.List) != 1 {
			continue
		}
		name := fn.Name.Name
		if !strings.HasPrefix(name, "Test") || name == "TestMain" {
			continue
		}
		if rest := name[len("Test"):]; rest != "" && unicode.IsLower([]rune(rest)[0]) {
			continue
		}
		names = append(names, name)
	}
	return names, nil
}

// runPattern is the -test.run value that runs only the package's lab tests
// (its other tests ran on the host already and may need host tools), narrowed
// by the user's -run pattern; ok is false when no lab test matches.
func runPattern(tests []string, user string) (pattern string, ok bool, err error) {
	first, rest := user, ""
	if i := splitTopLevel(user); i >= 0 {
		first, rest = user[:i], user[i:]
	}
	var keep []string
	if first == "" {
		keep = tests
	} else {
		re, err := regexp.Compile(first)
		if err != nil {
			return "", false, fmt.Errorf("-run: %w", err)
		}
		for _, t := range tests {
			if re.MatchString(t) {
				keep = append(keep, t)
			}
		}
	}
	if len(keep) == 0 {
		return "", false, nil
	}
	for i, t := range keep {
		keep[i] = regexp.QuoteMeta(t)
	}
	return "^(" + strings.Join(keep, "|") + ")$" + rest, true, nil
}

// splitTopLevel returns the index of the first "/" of a -run pattern that
// separates test from subtest patterns (not inside brackets or parentheses,
// not escaped), or -1.
func splitTopLevel(re string) int {
	depth, class := 0, false
	for i := 0; i < len(re); i++ {
		switch c := re[i]; {
		case c == '\\':
			i++
		case class:
			if c == ']' {
				class = false
			}
		case c == '[':
			class = true
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == '/' && depth == 0:
			return i
		}
	}
	return -1
}

// isLabFile reports whether a Go file's build constraint requires the lab
// tag (it is built with "lab" and not without it).
func isLabFile(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "package ") {
			break
		}
		if !constraint.IsGoBuild(line) {
			continue
		}
		expr, err := constraint.Parse(line)
		if err != nil {
			return false
		}
		with := expr.Eval(func(tag string) bool { return tag == "lab" || tag == "linux" || tag == "amd64" || tag == "unix" })
		without := expr.Eval(func(tag string) bool { return tag == "linux" || tag == "amd64" || tag == "unix" })
		return with && !without
	}
	return false
}
