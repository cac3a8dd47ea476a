package netfiltertest

import (
	"fmt"

	"github.com/lvskit/lvskit/netfilter"
)

// FakeModules is an in-memory Modules: Present is what is loaded, Available
// what Load can load (anything else fails as modprobe does for an unknown
// module), InUse what Unload refuses to unload.
type FakeModules struct {
	Present   map[string]bool
	Available map[string]bool
	InUse     map[string]bool
}

// NewFakeModules returns a fake where the named modules are available but
// not loaded.
func NewFakeModules(available ...string) *FakeModules {
	f := &FakeModules{Present: map[string]bool{}, Available: map[string]bool{}, InUse: map[string]bool{}}
	for _, m := range available {
		f.Available[m] = true
	}
	return f
}

var _ netfilter.Modules = (*FakeModules)(nil)

// Loaded reports whether the module is loaded.
func (f *FakeModules) Loaded(name string) (bool, error) { return f.Present[name], nil }

// Load loads an available module.
func (f *FakeModules) Load(name string) error {
	if !f.Available[name] && !f.Present[name] {
		return fmt.Errorf("modprobe: FATAL: Module %s not found", name)
	}
	f.Present[name] = true
	return nil
}

// Unload unloads a module that is not in use.
func (f *FakeModules) Unload(name string) error {
	if f.InUse[name] {
		return fmt.Errorf("modprobe: FATAL: Module %s is in use", name)
	}
	delete(f.Present, name)
	return nil
}
