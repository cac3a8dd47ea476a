package netfilter

// Modules finds out whether kernel modules are loaded and loads or unloads
// them. This package provides a fake; the implementation belongs to the
// application, which decides to run modprobe (internal/kmod answers
// Loaded).
type Modules interface {
	Loaded(name string) (bool, error)
	Load(name string) error
	Unload(name string) error
}
