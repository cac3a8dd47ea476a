//go:build lab

package ipvs_test

import (
	"net/netip"
	"os"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
)

// TestOpenScratch: a scratch Conn has an empty table of its own, with lo
// up (the kernel takes a destination there), apart from the caller's
// table and from another scratch Conn's; the caller's thread stays in its
// namespace.
func TestOpenScratch(t *testing.T) {
	own := openInNetns(t)
	svc := func(a string) *ipvs.Service {
		return &ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr(a), Port: 80,
			Scheduler: "rr", Netmask: 0xffffffff}
	}
	if err := own.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: svc("10.0.0.1")}); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	scratch, err := ipvs.OpenScratch()
	if err != nil {
		t.Fatalf("OpenScratch: %v", err)
	}
	defer scratch.Close()
	after, err := os.Stat("/proc/thread-self/ns/net")
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("the calling thread changed namespace: %v", err)
	}
	if svcs, err := scratch.Services(); err != nil || len(svcs) != 0 {
		t.Fatalf("scratch table: %d services, %v; want an empty table", len(svcs), err)
	}
	if err := scratch.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: svc("10.0.0.2")}); err != nil {
		t.Fatal(err)
	}
	dest := &ipvs.Destination{Family: ipvs.AFInet, Addr: netip.MustParseAddr("192.168.1.1"), Port: 80, Weight: 1, FwdMethod: ipvs.FwdMasq}
	if err := scratch.Exec(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: svc("10.0.0.2"), Dest: dest}); err != nil {
		t.Fatalf("a destination in the scratch table (lo must be up there): %v", err)
	}
	if svcs, err := own.Services(); err != nil || len(svcs) != 1 || svcs[0].Addr != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("the caller's table: %+v, %v; want 10.0.0.1:80 alone", svcs, err)
	}
	other, err := ipvs.OpenScratch()
	if err != nil {
		t.Fatalf("second OpenScratch: %v", err)
	}
	defer other.Close()
	if svcs, err := other.Services(); err != nil || len(svcs) != 0 {
		t.Errorf("a second scratch table: %d services, %v; want an empty one", len(svcs), err)
	}
	if svcs, err := scratch.Services(); err != nil || len(svcs) != 1 || svcs[0].Addr != netip.MustParseAddr("10.0.0.2") {
		t.Errorf("the first scratch table: %+v, %v; want 10.0.0.2:80 alone", svcs, err)
	}
	// The kernel refuses there what it refuses anywhere.
	if err := scratch.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP,
		Addr: netip.MustParseAddr("10.0.0.3"), Port: 80, Scheduler: "wrrr", Netmask: 0xffffffff}}); err == nil {
		t.Error("scheduler wrrr accepted in the scratch table")
	}
}
