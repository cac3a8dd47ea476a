package ipvs_test

import (
	"io"
	"net/netip"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/list"
	"github.com/lvskit/lvskit/save"
)

// BenchmarkListOverNetlink lists 1,000 services × 10 destinations through
// the netlink client and the in-memory kernel (which encodes every answer
// afresh, so part of the time is the test kernel's): the client's decode,
// the listing's sort and format, per service.
func BenchmarkListOverNetlink(b *testing.B) {
	b.Run("ipv4", func(b *testing.B) { benchmarkList(b, false) })
	// IPv6 services are read over netlink alone (no getsockopt).
	b.Run("ipv6", func(b *testing.B) { benchmarkList(b, true) })
}

func benchmarkList(b *testing.B, v6 bool) {
	k := newFakeKernel()
	k.perDump = 100
	c, err := ipvs.OpenTransportForTest(k, testPort)
	if err != nil {
		b.Fatal(err)
	}
	p := c.Pipeline(256)
	for i := range 1000 {
		s := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.AddrFrom4([4]byte{10, 0, byte(i / 250), byte(i%250 + 1)}), Port: 80, Scheduler: "wlc", Netmask: 0xffffffff}
		if v6 {
			s.Family, s.Addr, s.Netmask = ipvs.AFInet6, netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 12: byte(i >> 8), 15: byte(i)}), 128
		}
		p.Submit(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}, nil)
		for j := range 10 {
			d := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.AddrFrom4([4]byte{192, 168, byte(j + 1), byte(i%250 + 1)}), Port: 80, Weight: 1}
			if v6 {
				d.Family, d.Addr = ipvs.AFInet6, netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 13: byte(j + 1), 14: byte(i >> 8), 15: byte(i)})
			}
			p.Submit(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d}, nil)
		}
	}
	if err := p.Flush(); err != nil {
		b.Fatal(err)
	}
	// Replay the kernel's answers: the time is then the client's and the
	// listing's alone.
	rk := &replayKernel{k: k, seen: map[string][][]byte{}}
	c, err = ipvs.OpenTransportForTest(rk, testPort)
	if err != nil {
		b.Fatal(err)
	}
	// As ipvsadm -Ln and -Sn read: without the counters they do not print.
	ipvs.SkipStats(c, true)
	info, _ := c.Info()
	if err := list.Table(io.Discard, c, info, list.Options{Numeric: true}); err != nil {
		b.Fatal(err) // fills the replay cache
	}
	b.Run("list", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := list.Table(io.Discard, c, info, list.Options{Numeric: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("save", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := save.Write(io.Discard, c, list.Options{Numeric: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// replayKernel answers each request as the wrapped kernel answered the
// first request with the same bytes (sequence number aside), through the
// wrapped kernel's queue.
type replayKernel struct {
	k    *fakeKernel
	seen map[string][][]byte
	key  []byte
}

func (r *replayKernel) Send(b []byte) error {
	seq := ne.Uint32(b[8:])
	r.key = append(r.key[:0], b...)
	ne.PutUint32(r.key[8:], 0)
	answers, ok := r.seen[string(r.key)]
	if !ok {
		if err := r.k.Send(b); err != nil {
			return err
		}
		answers = r.k.queue
		r.k.queue = nil
		r.seen[string(r.key)] = answers
	}
	for _, a := range answers {
		for d := a; len(d) >= 16; d = d[(ne.Uint32(d)+3)&^3:] {
			ne.PutUint32(d[8:], seq)
		}
		r.k.queue = append(r.k.queue, a)
	}
	return nil
}

func (r *replayKernel) Recv(max int) ([][]byte, error) { return r.k.Recv(max) }

func (r *replayKernel) Close() error { return nil }
