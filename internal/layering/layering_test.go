package layering

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/lvskit/lvskit/"

// layers lists the module's packages from the bottom up; a package may
// import packages of lower layers only. Test files are not held to it.
var layers = [][]string{
	// Facts about the kernel that more than one package relies on.
	{"internal/svchash"},
	// The kernel interface and leaf helpers.
	{"ipvs", "names", "health", "internal/jsonstr", "internal/kongmsg", "internal/term", "internal/version", "internal/netnsid", "internal/clitable", "internal/kmod", "lab/internal/wire", "bench/benchdata", "internal/layering"},
	// Fakes of the kernel, ipvsadm's notation, host networking.
	{"ipvs/ipvstest", "ipvs/conformance", "ipvsadm/notation", "netfilter", "announce"},
	// ipvsadm's command-line parser; listings; lvsctl's engine (desired set,
	// diff, plan, apply, drain); the running system as the commands use it.
	{"ipvsadm/cmdline", "ipvsadm/list", "rules", "internal/sysenv"},
	// The rules text format (written by -S); the doubles built on the lower ones.
	{"save", "ipvsadm/list/listtest", "netfilter/netfiltertest"},
	// The drop-in CLI: execution and its restore engine.
	{"ipvsadm"},
	// Debian's wrapper scripts; the rules text (and JSON) read as a desired
	// rule set.
	{"ipvsadm/wrappers", "rules/desired"},
	// lvsctl top's model and screen; keepalived.conf read as a desired
	// state; what lvsctl leaves on disk (the journal, run's record) and
	// what its commands and lvsctl run share.
	{"lvsctl/top", "rules/keepalived", "lvsprep/birdconf", "lvsctl/record", "lvsctl/internal/cliutil"},
	// lvsctl run, the health-checking daemon.
	{"lvsctl/run"},
	// The new commands.
	{"lvsctl", "lvsprep"},
	// The environment of the three ipvsadm programs.
	{"cmd/internal/ipvsadmenv"},
	// Thin mains.
	{"cmd/ipvsadm", "cmd/ipvsadm-save", "cmd/ipvsadm-restore", "cmd/lvsctl", "cmd/lvsprep"},
	// The lab's VM and its test helpers.
	{"lab/vm", "lab/labtest"},
	// The lab, benchmarks and the checks of what ships; nothing imports them.
	{"lab/guestinit", "lab/labrun", "bench", "bench/benchplot", "e2e",
		"packaging", "packaging/hosttool", "man", "completions", "testscripts"},
}

func layerOf() map[string]int {
	m := map[string]int{}
	for i, l := range layers {
		for _, p := range l {
			m[p] = i
		}
	}
	return m
}

// TestImportsRunDownward reads every non-test Go file of the module (all
// build tags, all systems) and checks each import of a module package
// against the layers.
func TestImportsRunDownward(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	layer := layerOf()
	seen := map[string]bool{}
	ctx := build.Default
	ctx.UseAllFiles = true // every GOOS and build tag
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
			return filepath.SkipDir
		}
		pkg, err := ctx.ImportDir(path, build.ImportComment)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			if _, ok := err.(*build.MultiplePackageError); !ok {
				return err
			}
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if len(pkg.GoFiles) == 0 {
			return nil
		}
		seen[rel] = true
		from, ok := layer[rel]
		if !ok {
			t.Errorf("package %s has no layer: add it to layers (and to the Layout table of docs/hacking.md)", rel)
			return nil
		}
		for _, imp := range pkg.Imports {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			to, ok := layer[dep]
			switch {
			case !ok:
				t.Errorf("%s imports %s, which has no layer", rel, dep)
			case to >= from:
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must run to lower layers", rel, from, dep, to)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range layer {
		if !seen[p] {
			t.Errorf("layers name %s, which is not a package of the module", p)
		}
	}
	if len(seen) < 30 {
		t.Errorf("found only %d packages: the walk is broken", len(seen))
	}
}

// TestLayersNameEachPackageOnce guards the table itself.
func TestLayersNameEachPackageOnce(t *testing.T) {
	var all []string
	for _, l := range layers {
		all = append(all, l...)
	}
	slices.Sort(all)
	if c := slices.Compact(slices.Clone(all)); len(c) != len(all) {
		t.Errorf("a package is named in two layers: %v", all)
	}
}
