// Package kmod tells whether the running kernel has a module.
//
// A module is loaded or built in (Loaded), or also loadable from modules.dep
// (Has). It never loads anything.
package kmod

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Modules answers for one kernel's module tree. The zero value reads the
// running kernel's (/lib/modules/RELEASE and /sys/module).
type Modules struct {
	// Dir is the module tree ("" means /lib/modules/ plus the running
	// kernel's release).
	Dir string
	// Sys lists the loaded modules ("" means /sys/module).
	Sys string

	once    sync.Once
	builtin map[string]bool // in modules.builtin
	names   map[string]bool // built in or in modules.dep
	err     error
}

// Has reports whether module name (as modprobe spells it; '-' and '_' are
// the same) is loaded, built in or loadable. When the module tree cannot
// be read it returns false and an error: the answer is unknown.
func (m *Modules) Has(name string) (bool, error) {
	name, err := sysName(name)
	if err != nil {
		return false, err
	}
	if m.inSys(name) {
		return true, nil
	}
	m.once.Do(m.load)
	if m.err != nil {
		return false, m.err
	}
	return m.names[name], nil
}

// Loaded reports whether module name is loaded or built into the kernel:
// present without modprobe. A missing module tree means no built-in list,
// not an error: a kernel without modules.builtin builds nothing in that
// a module name would name.
func (m *Modules) Loaded(name string) (bool, error) {
	name, err := sysName(name)
	if err != nil {
		return false, err
	}
	if m.inSys(name) {
		return true, nil
	}
	m.once.Do(m.load)
	if m.err != nil && m.builtin == nil {
		return false, m.err
	}
	return m.builtin[name], nil
}

// sysName is name as sysfs spells it ('_' for '-'), refused when it could
// name a path.
func sysName(name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return "", fmt.Errorf("bad module name %q", name)
	}
	return strings.ReplaceAll(name, "-", "_"), nil
}

// inSys reports whether the kernel lists the module under /sys/module:
// loaded, or built in with parameters.
func (m *Modules) inSys(name string) bool {
	sys := m.Sys
	if sys == "" {
		sys = "/sys/module"
	}
	_, err := os.Lstat(filepath.Join(sys, name))
	return err == nil
}

func (m *Modules) load() {
	dir := m.Dir
	if dir == "" {
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil {
			m.err = fmt.Errorf("kernel release: %w", err)
			return
		}
		dir = filepath.Join("/lib/modules", unix.ByteSliceToString(u.Release[:]))
	}
	m.names, m.builtin = map[string]bool{}, map[string]bool{}
	switch err := m.read(filepath.Join(dir, "modules.builtin"), m.builtin); {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		m.err, m.builtin = err, nil
		return
	}
	maps.Copy(m.names, m.builtin)
	switch err := m.read(filepath.Join(dir, "modules.dep"), m.names); {
	case errors.Is(err, os.ErrNotExist):
		if len(m.builtin) == 0 {
			m.err = fmt.Errorf("no modules.dep in %s: cannot tell which modules this kernel can load", dir)
		}
	case err != nil:
		m.err = err
	}
}

// read adds the module names of a modules.dep or modules.builtin file:
// the base name of each line's first path, without its extensions.
func (m *Modules) read(path string, names map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		line := s.Text()
		if i := strings.IndexByte(line, ':'); i >= 0 {
			line = line[:i]
		}
		base := filepath.Base(strings.TrimSpace(line))
		if i := strings.Index(base, ".ko"); i > 0 {
			names[strings.ReplaceAll(base[:i], "-", "_")] = true
		}
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
