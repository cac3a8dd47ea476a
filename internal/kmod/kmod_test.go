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
