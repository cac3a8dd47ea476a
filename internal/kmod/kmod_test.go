package kmod

import (
	"os"
	"path/filepath"
	"testing"
)

func TestHas(t *testing.T) {
	dir, sys := t.TempDir(), t.TempDir()
	dep := "kernel/net/netfilter/ipvs/ip_vs_rr.ko.xz: kernel/net/netfilter/ipvs/ip_vs.ko.xz\n" +
		"kernel/net/netfilter/ipvs/ip_vs.ko.xz: kernel/net/netfilter/nf_conntrack.ko.xz\n" +
		"kernel/net/netfilter/ipvs/ip_vs_pe_sip.ko:\n"
	if err := os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(dep), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte("kernel/net/foo/some-builtin.ko\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(sys, "ip_vs_custom"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := &Modules{Dir: dir, Sys: sys}
	for name, want := range map[string]bool{
		"ip_vs_rr": true, "ip_vs_pe_sip": true, "ip_vs": true, "nf_conntrack": false,
		"some_builtin": true, "some-builtin": true, "ip_vs_custom": true, "ip_vs_lcx": false,
	} {
		got, err := m.Has(name)
		if err != nil || got != want {
			t.Errorf("Has(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
}

func TestHasWithoutTree(t *testing.T) {
	m := &Modules{Dir: t.TempDir(), Sys: t.TempDir()}
	if got, err := m.Has("ip_vs_rr"); got || err == nil {
		t.Errorf("Has without modules.dep = %v, %v; want false and an error", got, err)
	}
}

// TestLoaded: loaded (in /sys/module) or built in, never merely loadable;
// '-' and '_' alike; a name that could be a path refused.
func TestLoaded(t *testing.T) {
	dir, sys := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(sys, "ip_vs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte("kernel/net/ipv4/ipip.ko\nkernel/drivers/net/dummy.ko\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "modules.dep"), []byte("kernel/net/netfilter/xt_ipvs.ko:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &Modules{Dir: dir, Sys: sys}
	for name, want := range map[string]bool{"ip_vs": true, "ip-vs": true, "ipip": true, "dummy": true, "xt_ipvs": false} {
		if got, err := m.Loaded(name); err != nil || got != want {
			t.Errorf("Loaded(%s) = %t, %v; want %t", name, got, err, want)
		}
	}
	for _, bad := range []string{"../etc", "", ".."} {
		if _, err := m.Loaded(bad); err == nil {
			t.Errorf("Loaded(%q) accepted", bad)
		}
	}
	// No module tree at all: loaded ones are still known.
	bare := &Modules{Dir: t.TempDir(), Sys: sys}
	if got, err := bare.Loaded("ip_vs"); !got || err != nil {
		t.Errorf("Loaded(ip_vs) without a tree = %t, %v", got, err)
	}
	if got, err := bare.Loaded("dummy"); got || err != nil {
		t.Errorf("Loaded(dummy) without a tree = %t, %v; want false, no error", got, err)
	}
}
