package vm

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// sharedLibs returns the guest paths of everything bin needs at run time:
// its program interpreter and the transitive closure of its DT_NEEDED
// libraries. Reading the ELF headers is what ldd reports without running the
// loader once per file (iptables alone brings a hundred plugins).
func sharedLibs(a *Arch, bin string, seen map[string]bool) ([]string, error) {
	f, err := elf.Open(a.hostPath(bin))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	defer f.Close()
	var out []string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return nil, fmt.Errorf("%s: interpreter: %w", bin, err)
			}
			interp := strings.TrimRight(string(b), "\x00")
			if !seen[interp] {
				seen[interp] = true
				out = append(out, interp)
			}
		}
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	runpath, _ := f.DynString(elf.DT_RUNPATH)
	rpath, _ := f.DynString(elf.DT_RPATH)
	var dirs []string
	for _, rp := range append(rpath, runpath...) {
		for _, d := range strings.Split(rp, ":") {
			if d != "" && !strings.Contains(d, "$") {
				dirs = append(dirs, d)
			}
		}
	}
	dirs = append(dirs, a.libDirs()...)
	for _, name := range needed {
		lib := ""
		for _, d := range dirs {
			cand := filepath.Join(d, name)
			if _, err := os.Stat(a.hostPath(cand)); err == nil {
				lib = cand
				break
			}
		}
		if lib == "" {
			return nil, fmt.Errorf("%s needs %s, which is in none of %s", bin, name, strings.Join(dirs, " "))
		}
		if seen[lib] {
			continue
		}
		seen[lib] = true
		out = append(out, lib)
		more, err := sharedLibs(a, lib, seen)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// isELF reports whether path starts with the ELF magic (scripts don't).
func isELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	if _, err := f.Read(magic[:]); err != nil {
		return false
	}
	return string(magic[:]) == elf.ELFMAG
}
