package ipvs

import (
	"net/netip"
	"testing"
)

// benchDestRequest is the request of a saved destination line.
func benchDestRequest() (*Request, *Destination) {
	s := Service{Family: AFInet, Protocol: ProtoTCP, Addr: netip.MustParseAddr("10.0.3.250"), Port: 80, Scheduler: "wlc", Netmask: 0xffffffff}
	d := Destination{Family: AFInet, Addr: netip.MustParseAddr("192.168.10.250"), Port: 80, FwdMethod: FwdMasq, Weight: 1}
	return &Request{Cmd: CmdNewDest, Service: &s, Dest: &d}, &d
}

func BenchmarkEncodeNewDest(b *testing.B) {
	req, _ := benchDestRequest()
	var m builder
	b.ReportAllocs()
	for b.Loop() {
		m.b, m.alike.ok = m.b[:0], false // in full, not a copy of the last
		m.request(0x1c, nlmFRequest, 7, req)
	}
	b.ReportMetric(float64(len(m.b)), "bytes")
}

// BenchmarkEncodeAlike is BenchmarkEncodeNewDest for a run of a
// service's destinations, which differ only in their addresses: all but
// the first are copies of the request before (builder.alike).
func BenchmarkEncodeAlike(b *testing.B) {
	req, d := benchDestRequest()
	var m builder
	b.ReportAllocs()
	for b.Loop() {
		m.b = m.b[:0]
		for i := range 10 {
			d.Addr = netip.AddrFrom4([4]byte{192, 168, byte(i), 250})
			m.request(0x1c, nlmFRequest, 7, req)
		}
	}
	b.ReportMetric(float64(len(m.b))/10, "bytes/req")
}
