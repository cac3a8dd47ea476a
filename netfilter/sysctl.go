package netfilter

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Sysctl reads and writes kernel parameters. Names are paths below
// /proc/sys with slashes, e.g. "net/ipv4/conf/eth0.100/rp_filter": unlike the
// dotted form, a path keeps interface names that contain dots unambiguous.
type Sysctl interface {
	Get(name string) (string, error)
	Set(name, value string) error
}

// ProcSys is the real Sysctl: files under Root, which is /proc/sys when
// empty. Tests point Root at a temporary directory.
type ProcSys struct {
	Root string
}

var _ Sysctl = ProcSys{}

func (p ProcSys) path(name string) (string, error) {
	if err := validSysctlName(name); err != nil {
		return "", err
	}
	root := p.Root
	if root == "" {
		root = "/proc/sys"
	}
	return filepath.Join(root, filepath.FromSlash(name)), nil
}

// Get returns the parameter's value without the trailing newline. A missing
// parameter gives an error that matches os.ErrNotExist.
func (p ProcSys) Get(name string) (string, error) {
	path, err := p.path(name)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading sysctl %s: %w", SysctlName(name), err)
	}
	return strings.TrimRight(string(b), "\n"), nil
}

// Set writes the value. It does not create parameters: a missing one (for
// instance net.ipv4.vs.* before ip_vs is loaded) is an error matching
// os.ErrNotExist.
func (p ProcSys) Set(name, value string) error {
	path, err := p.path(name)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("writing sysctl %s: %w", SysctlName(name), err)
	}
	_, err = f.WriteString(value + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing sysctl %s=%s: %w", SysctlName(name), value, err)
	}
	return nil
}

// validSysctlName checks that name is a relative slash path without empty,
// "." or ".." components, so it cannot escape the sysctl root.
func validSysctlName(name string) error {
	if name == "" {
		return errors.New("empty sysctl name")
	}
	for c := range strings.SplitSeq(name, "/") {
		if c == "" || c == "." || c == ".." {
			return fmt.Errorf("bad sysctl name %q", name)
		}
	}
	return nil
}

// SysctlName is the dotted form sysctl(8) accepts for a path: components
// joined by dots, with dots inside a component (a VLAN interface such as
// eth0.100) written as slashes, as sysctl(8) documents.
func SysctlName(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, ".", "/")
	}
	return strings.Join(parts, ".")
}

// SysctlPath builds a sysctl path from components, e.g.
// SysctlPath("net", "ipv4", "conf", "eth0.100", "rp_filter").
func SysctlPath(components ...string) string {
	return strings.Join(components, "/")
}
