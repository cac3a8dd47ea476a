package hosttool_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/lab/vm"
)

// makefilePackages returns the Debian packages `make deps` installs, and
// those `make lab-deps` installs (the demo's).
func makefilePackages(t *testing.T) (deps, lab []string) {
	t.Helper()
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	src := strings.ReplaceAll(string(b), "\\\n", " ")
	vars := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^(LAB_PACKAGES|ARM64_PACKAGES|HOST_PACKAGES)\s*:=(.*)$`).FindAllStringSubmatch(src, -1) {
		vars[m[1]] = strings.Fields(m[2])
	}
	if len(vars["LAB_PACKAGES"]) == 0 || len(vars["ARM64_PACKAGES"]) == 0 || len(vars["HOST_PACKAGES"]) == 0 {
		t.Fatalf("Makefile: LAB_PACKAGES, ARM64_PACKAGES or HOST_PACKAGES not found")
	}
	if !strings.Contains(src, "DEBIAN_PACKAGES := $(LAB_PACKAGES) $(ARM64_PACKAGES) $(HOST_PACKAGES)") {
		t.Fatal("Makefile: DEBIAN_PACKAGES is no longer LAB_PACKAGES, ARM64_PACKAGES and HOST_PACKAGES")
	}
	if !strings.Contains(src, "\t@tools/deps.sh $(LAB_PACKAGES)\n") {
		t.Fatal("Makefile: lab-deps no longer installs LAB_PACKAGES")
	}
	deps = append(append(slices.Clone(vars["LAB_PACKAGES"]), vars["ARM64_PACKAGES"]...), vars["HOST_PACKAGES"]...)
	return deps, vars["LAB_PACKAGES"]
}

// TestDepsInstallsWhatTestsRequire binds `make deps` to its users: every
// package a host test names through Require, RequireFile or RequirePackage,
// and every package the lab image is made of, is in the Makefile's list; so
// a fresh machine's first `make test` finds everything installed.
func TestDepsInstallsWhatTestsRequire(t *testing.T) {
	deps, lab := makefilePackages(t)
	for _, p := range vm.Packages {
		if !slices.Contains(lab, p) {
			t.Errorf("the lab needs %s, which `make lab-deps` (the demo's) does not install", p)
		}
	}
	for _, p := range append(slices.Clone(vm.Packages), vm.Arm64Packages...) {
		if !slices.Contains(deps, p) {
			t.Errorf("the lab needs %s, which `make deps` does not install", p)
		}
	}
	call := regexp.MustCompile(`hosttool\.(?:Require|RequireFile)\(t, "[^"]*", "([^"]+)"\)|hosttool\.RequirePackage\(t, "([^"]+)"\)`)
	seen := 0
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".cache" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range call.FindAllStringSubmatch(string(b), -1) {
			seen++
			pkg := m[1] + m[2]
			if !slices.Contains(deps, pkg) {
				t.Errorf("%s needs the Debian package %s, which `make deps` does not install", path, pkg)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 10 {
		t.Errorf("found only %d hosttool calls; has the pattern drifted?", seen)
	}
}
