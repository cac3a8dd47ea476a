package main

import (
	"os"
	"path/filepath"
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

func TestSplitDealsRoundRobin(t *testing.T) {
	pkgs := []*testPkg{{ImportPath: "a"}, {ImportPath: "b"}, {ImportPath: "c"}}
	g := split(pkgs, 2)
	if len(g) != 2 || len(g[0]) != 2 || len(g[1]) != 1 || g[1][0].ImportPath != "b" {
		t.Errorf("split into 2: %v", g)
	}
	if g := split(pkgs, 5); len(g) != 3 {
		t.Errorf("split into 5 gave %d groups, want one per package", len(g))
	}
}
