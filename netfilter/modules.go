package netfilter

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Modules finds out whether kernel modules are loaded and loads or unloads
// them. This package provides the read side (ModuleLoaded) and a fake; the
// loading implementation belongs to the application, which decides to run
// modprobe.
type Modules interface {
	Loaded(name string) (bool, error)
	Load(name string) error
	Unload(name string) error
}

// ModuleLoaded reports whether the module is present: loaded, or built into
// the kernel. sysRoot is /sys when empty, moduleRoot /lib/modules/<release>;
// tests point them at temporary directories.
func ModuleLoaded(sysRoot, moduleRoot, name string) (bool, error) {
	if sysRoot == "" {
		sysRoot = "/sys"
	}
	if strings.ContainsAny(name, "/") || name == "" || name == "." || name == ".." {
		return false, fmt.Errorf("bad module name %q", name)
	}
	// modprobe treats - and _ alike; sysfs uses _.
	sysName := strings.ReplaceAll(name, "-", "_")
	if _, err := os.Stat(filepath.Join(sysRoot, "module", sysName)); err == nil {
		return true, nil
	} else if !os.IsNotExist(err) {
		return false, fmt.Errorf("looking for module %s: %w", name, err)
	}
	// Built-in modules without parameters have no /sys/module entry; the
	// kernel's modules.builtin lists them as kernel/.../name.ko.
	if moduleRoot == "" {
		return false, nil
	}
	b, err := os.ReadFile(filepath.Join(moduleRoot, "modules.builtin"))
	if os.IsNotExist(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("looking for module %s: %w", name, err)
	}
	for line := range strings.Lines(string(b)) {
		base := filepath.Base(strings.TrimSpace(line))
		if strings.ReplaceAll(strings.TrimSuffix(base, ".ko"), "-", "_") == sysName {
			return true, nil
		}
	}
	return false, nil
}
