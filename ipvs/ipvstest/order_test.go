package ipvstest_test

import (
	"net/netip"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
)

func TestSetServiceOrder(t *testing.T) {
	f := ipvstest.New()
	svc := func(last byte) ipvs.Service {
		return ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.AddrFrom4([4]byte{10, 0, 0, last}), Port: 80, Scheduler: "rr", Netmask: 0xffffffff}
	}
	for i := byte(1); i <= 4; i++ {
		s := svc(i)
		if err := f.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}); err != nil {
			t.Fatal(err)
		}
	}
	order := func() []byte {
		svcs, err := f.Services()
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		for _, s := range svcs {
			out = append(out, s.Addr.As4()[3])
		}
		return out
	}
	if err := f.SetServiceOrder([]ipvs.Service{svc(3), svc(1)}); err != nil {
		t.Fatal(err)
	}
	if got := string(order()); got != "\x03\x01\x02\x04" {
		t.Errorf("order %v, want 3 1 2 4 (the named ones first, the rest as before)", []byte(got))
	}
	if err := f.SetServiceOrder([]ipvs.Service{svc(9)}); err == nil {
		t.Error("ordering by a service that does not exist succeeded")
	}
	if got := string(order()); got != "\x03\x01\x02\x04" {
		t.Errorf("a failed SetServiceOrder changed the order to %v", []byte(got))
	}
}
