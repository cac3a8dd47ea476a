package ipvs_test

import (
	"fmt"
	"net/netip"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
)

// open stands for ipvs.Open, which needs a kernel with IPVS: the examples
// run on the fake, which answers as the kernel does.
func open() (ipvs.Client, error) { return ipvstest.New(), nil }

// A virtual service with two real servers, made one change at a time.
func Example() {
	c, err := open() // ipvs.Open() on a director
	if err != nil {
		panic(err)
	}
	defer c.Close()
	svc := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 80,
		Scheduler: "wrr", Netmask: 0xffffffff}
	if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &svc}); err != nil {
		panic(err)
	}
	for i, rs := range []string{"192.168.1.1", "192.168.1.2"} {
		d := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.MustParseAddr(rs), Port: 80, FwdMethod: ipvs.FwdRoute, Weight: uint32(i + 1)}
		if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &svc, Dest: &d}); err != nil {
			panic(err)
		}
	}
	dests, err := c.Destinations(svc)
	if err != nil {
		panic(err)
	}
	for _, d := range dests { // most recently added first
		fmt.Println(d.Addr, d.Weight, d.ActiveConns)
	}
	// Output:
	// 192.168.1.2 2 0
	// 192.168.1.1 1 0
}

// Many changes in flight on one socket: each answer comes to its done
// function, in order; Flush waits for the last.
func ExamplePipeline() {
	c, _ := open()
	defer c.Close()
	p := c.Pipeline(256)
	failed := 0
	done := func(err error) {
		if err != nil {
			failed++
		}
	}
	for i := range 3 {
		svc := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.AddrFrom4([4]byte{10, 0, 0, 1}),
			Port: uint16(80 + i%2), Scheduler: "rr", Netmask: 0xffffffff}
		if err := p.Submit(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &svc}, done); err != nil {
			panic(err) // the transport failed
		}
	}
	if err := p.Flush(); err != nil {
		panic(err)
	}
	svcs, _ := c.Services()
	fmt.Println(len(svcs), "services,", failed, "refused") // the third repeats the first
	// Output: 2 services, 1 refused
}

// Listing a large table without a copy per call: the service is valid
// during the callback only, and one destination buffer serves every
// service.
func ExampleDumpServices() {
	c, _ := open()
	defer c.Close()
	for _, port := range []uint16{80, 443} {
		svc := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.0.0.1"), Port: port,
			Scheduler: "wlc", Netmask: 0xffffffff}
		d := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.MustParseAddr("192.168.1.1"), Port: port, FwdMethod: ipvs.FwdMasq, Weight: 1}
		_ = c.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &svc})
		_ = c.Exec(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &svc, Dest: &d})
	}
	var svcs []ipvs.Service
	_ = ipvs.DumpServices(c, func(s *ipvs.ServiceEntry) error {
		svcs = append(svcs, s.Service) // keep the configuration, not the pointer
		return nil
	})
	var buf []ipvs.DestinationEntry
	for i := range svcs {
		buf, _ = ipvs.AppendDestinations(c, buf[:0], &svcs[i])
		fmt.Println(svcs[i].Port, len(buf), buf[0].Addr)
	}
	// Output:
	// 80 1 192.168.1.1
	// 443 1 192.168.1.1
}
