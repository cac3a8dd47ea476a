// Package kmod tells whether the running kernel has a module or can load
// it: built in, loaded, or listed in modules.dep where modprobe finds it.
// It never loads anything.
package kmod

import (
	"bufio"
	"errors"
	"fmt"
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

	once  sync.Once
	names map[string]bool // built in or in modules.dep
	err   error
}

// Has reports whether module name (as modprobe spells it; '-' and '_' are
// the same) is loaded, built in or loadable. When the module tree cannot
// be read it returns false and an error: the answer is unknown.
func (m *Modules) Has(name string) (bool, error) {
	name = strings.ReplaceAll(name, "-", "_")
	sys := m.Sys
	if sys == "" {
		sys = "/sys/module"
	}
	if _, err := os.Lstat(filepath.Join(sys, name)); err == nil {
		return true, nil
	}
	m.once.Do(m.load)
	if m.err != nil {
		return false, m.err
	}
	return m.names[name], nil
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
	m.names = map[string]bool{}
	found := false
	for _, f := range []string{"modules.dep", "modules.builtin"} {
		err := m.read(filepath.Join(dir, f))
		switch {
		case err == nil:
			found = true
		case !errors.Is(err, os.ErrNotExist):
			m.err = err
			return
		}
	}
	if !found {
		m.err = fmt.Errorf("no modules.dep in %s: cannot tell which modules this kernel can load", dir)
	}
}

// read adds the module names of a modules.dep or modules.builtin file:
// the base name of each line's first path, without its extensions.
func (m *Modules) read(path string) error {
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
			m.names[strings.ReplaceAll(base[:i], "-", "_")] = true
		}
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
