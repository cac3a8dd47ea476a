//go:build lab

package kmod

import (
	"testing"

	"github.com/lvskit/lvskit/lab/labtest"
)

// TestLabLoaded: on Debian's kernel, ip_vs (preloaded by the lab) is
// loaded, a module that does not exist is neither loaded nor loadable, and
// a scheduler module not yet loaded is loadable only.
func TestLabLoaded(t *testing.T) {
	labtest.Require(t)
	var m Modules
	if ok, err := m.Loaded("ip_vs"); err != nil || !ok {
		t.Errorf("Loaded(ip_vs) = %t, %v; the lab preloads it", ok, err)
	}
	for _, name := range []string{"no_such_module"} {
		if ok, err := m.Loaded(name); err != nil || ok {
			t.Errorf("Loaded(%s) = %t, %v", name, ok, err)
		}
		if ok, err := m.Has(name); err != nil || ok {
			t.Errorf("Has(%s) = %t, %v", name, ok, err)
		}
	}
	if ok, err := m.Has("ip_vs_mh"); err != nil || !ok {
		t.Errorf("Has(ip_vs_mh) = %t, %v; Debian's kernel ships it", ok, err)
	}
}
