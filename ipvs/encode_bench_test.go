package ipvs

import (
	"net/netip"
	"testing"
)

func BenchmarkEncodeNewDest(b *testing.B) {
	s := Service{Family: AFInet, Protocol: ProtoTCP, Addr: netip.MustParseAddr("10.0.3.250"), Port: 80, Scheduler: "wlc", Netmask: 0xffffffff}
	d := Destination{Family: AFInet, Addr: netip.MustParseAddr("192.168.10.250"), Port: 80, FwdMethod: FwdMasq, Weight: 1}
	req := Request{Cmd: CmdNewDest, Service: &s, Dest: &d}
	var m builder
	b.ReportAllocs()
	for b.Loop() {
		m.b = m.b[:0]
		m.request(0x1c, nlmFRequest, 7, &req)
	}
	b.ReportMetric(float64(len(m.b)), "bytes")
}
