package ipvs_test

// fakeKernel is a host-side stand-in for the kernel's end of the IPVS
// generic netlink socket: it parses the client's requests the way
// ip_vs_ctl.c does, lets an ipvstest.Fake decide the outcome, and answers
// with the messages the kernel would send (replies, dumps split over
// several datagrams, acknowledgements, NLMSG_DONE). Its encoder is written
// separately from the client's, from the kernel's side of the format.
//
// Faults can be injected to exercise the client's protocol handling:
// answers that never come, answers the kernel swallows, strangers' and
// stale messages, a full receive buffer.

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
)

// Linux's netlink constants, spelled here so that the tests build on every
// system (golang.org/x/sys/unix has them on Linux only).
const (
	genlIDCtrl         = 0x10
	ctrlCmdNewFamily   = 1
	ctrlAttrFamilyID   = 1
	ctrlAttrFamilyName = 2
	nlmsgError         = 2
	nlmsgDone          = 3
	nlmFMulti          = 0x2
	nlmFAck            = 0x4
	nlmFDump           = 0x300
)

var ne = binary.NativeEndian

const (
	testFamilyID = 0x1c
	testPort     = 4242
)

type fakeKernel struct {
	fake     *ipvstest.Fake
	noFamily bool // the controller does not know "IPVS"
	perDump  int  // messages per dump datagram (default 3)
	queue    [][]byte

	// Fault injection.
	silent    bool              // never answer anything (a hung kernel)
	swallow   map[ipvs.Op]bool  // process, but answer nothing (EINTR)
	strangers bool              // add messages for other ports and stale sequences
	enobufs   int               // when > 0: fail Recv with ENOBUFS once this many datagrams are queued
	failCmd   map[ipvs.Op]error // answer this errno without processing (EPERM for GET_INFO...)
	// mangle, when set, rewrites each answer datagram as Recv hands it
	// out (garbled, truncated, renumbered answers).
	mangle func(d []byte) []byte
	// legacyErr fails every legacy request; beforeLegacyDests and
	// afterLegacyDests run around a legacy destinations answer.
	legacyErr                           unix.Errno
	beforeLegacyDests, afterLegacyDests func()
	beforeLegacyServices                func()
	// legacyCalls counts the legacy requests by option; destsAsked lists
	// the services of the legacy destinations requests answered.
	legacyCalls map[int]int
	destsAsked  []ipvs.Service
	requests    int
	lastSeq     uint32
}

func newFakeKernel(opts ...ipvstest.Option) *fakeKernel {
	return &fakeKernel{fake: ipvstest.New(opts...), perDump: 3, swallow: map[ipvs.Op]bool{}, failCmd: map[ipvs.Op]error{}}
}

func (k *fakeKernel) Close() error { return nil }

func (k *fakeKernel) Recv(max int) ([][]byte, error) {
	if k.enobufs > 0 && len(k.queue) >= k.enobufs {
		k.queue = nil
		return nil, unix.ENOBUFS
	}
	if len(k.queue) == 0 {
		return nil, unix.EAGAIN
	}
	n := min(max, len(k.queue))
	out := k.queue[:n:n]
	k.queue = k.queue[n:]
	if k.mangle != nil {
		for i, d := range out {
			out[i] = k.mangle(d)
		}
	}
	return out, nil
}

// Send processes every message of the datagram in order, as
// netlink_rcv_skb does.
func (k *fakeKernel) Send(b []byte) error {
	for len(b) > 0 {
		if len(b) < 16 {
			return unix.EINVAL
		}
		l := int(ne.Uint32(b))
		if l < 16 || l > len(b) {
			return unix.EINVAL
		}
		k.message(b[:l])
		b = b[(l+3)&^3:]
	}
	return nil
}

type hdr struct {
	typ   uint16
	flags uint16
	seq   uint32
}

func (k *fakeKernel) message(m []byte) {
	h := hdr{typ: ne.Uint16(m[4:]), flags: ne.Uint16(m[6:]), seq: ne.Uint32(m[8:])}
	k.requests++
	k.lastSeq = h.seq
	if k.silent {
		return
	}
	if k.strangers {
		// Another socket's answer and a stale one: the client must ignore both.
		k.queue = append(k.queue, ackMsg(hdr{seq: h.seq}, testPort+1, 0), ackMsg(hdr{seq: h.seq - 1000}, testPort, 0))
	}
	switch {
	case h.typ == 1: // NLMSG_NOOP
		k.ack(h, 0)
	case h.typ == genlIDCtrl:
		a := parseAttrs(m[20:])
		if k.noFamily || cstr(a[ctrlAttrFamilyName]) != "IPVS" {
			k.ack(h, unix.ENOENT)
			return
		}
		var w msgWriter
		w.start(genlIDCtrl, 0, h.seq, ctrlCmdNewFamily)
		w.u16(ctrlAttrFamilyID, testFamilyID)
		w.str(ctrlAttrFamilyName, "IPVS")
		k.queue = append(k.queue, w.finish())
		k.ack(h, 0)
	case h.typ == testFamilyID:
		k.ipvs(h, ipvs.Op(m[16]), parseAttrs(m[20:]))
	default:
		k.ack(h, unix.EOPNOTSUPP)
	}
}

func (k *fakeKernel) ack(h hdr, errno unix.Errno) {
	if errno != 0 || h.flags&nlmFAck != 0 {
		k.queue = append(k.queue, ackMsg(h, testPort, errno))
	}
}

func ackMsg(h hdr, port uint32, errno unix.Errno) []byte {
	b := make([]byte, 36)
	ne.PutUint32(b, 36)
	ne.PutUint16(b[4:], nlmsgError)
	ne.PutUint32(b[8:], h.seq)
	ne.PutUint32(b[12:], port)
	ne.PutUint32(b[16:], uint32(-int32(errno)))
	ne.PutUint32(b[20:], 36) // the echoed request header (NETLINK_CAP_ACK)
	return b
}

func (k *fakeKernel) ipvs(h hdr, cmd ipvs.Op, top attrMap) {
	if err, ok := k.failCmd[cmd]; ok {
		k.ack(h, err.(unix.Errno))
		return
	}
	dump := h.flags&nlmFDump == nlmFDump
	switch cmd {
	case ipvs.CmdGetInfo:
		info, _ := k.fake.Info()
		var w msgWriter
		w.start(testFamilyID, 0, h.seq, 14) // SET_INFO
		w.u32(1, info.Version)
		w.u32(2, info.ConnTabSize)
		k.queue = append(k.queue, w.finish())
		k.ack(h, 0)
	case ipvs.CmdGetConfig:
		t, _ := k.fake.Timeouts()
		var w msgWriter
		w.start(testFamilyID, 0, h.seq, uint8(ipvs.CmdSetConfig))
		w.u32(4, t.TCP)
		w.u32(5, t.TCPFin)
		w.u32(6, t.UDP)
		k.queue = append(k.queue, w.finish())
		k.ack(h, 0)
	case ipvs.CmdGetService:
		if !dump {
			s, ok := parseService(top[1])
			if !ok {
				k.ack(h, unix.EINVAL)
				return
			}
			got, err := k.fake.Service(s)
			if err != nil {
				k.ack(h, errnoOf(err))
				return
			}
			var w msgWriter
			w.start(testFamilyID, 0, h.seq, uint8(ipvs.CmdNewService))
			w.service(&got)
			k.queue = append(k.queue, w.finish())
			k.ack(h, 0)
			return
		}
		svcs, _ := k.fake.Services()
		k.dump(h, len(svcs), func(w *msgWriter, i int) {
			w.start(testFamilyID, nlmFMulti, h.seq, uint8(ipvs.CmdNewService))
			w.service(&svcs[i])
		})
	case ipvs.CmdGetDest:
		s, ok := parseService(top[1])
		var dests []ipvs.DestinationEntry
		if ok {
			dests, _ = k.fake.Destinations(s)
		}
		k.dump(h, len(dests), func(w *msgWriter, i int) {
			w.start(testFamilyID, nlmFMulti, h.seq, uint8(ipvs.CmdNewDest))
			w.dest(&dests[i])
		})
	case ipvs.CmdGetDaemon:
		ds, _ := k.fake.Daemons()
		k.dump(h, len(ds), func(w *msgWriter, i int) {
			w.start(testFamilyID, nlmFMulti, h.seq, uint8(ipvs.CmdNewDaemon))
			w.daemon(&ds[i])
		})
	default:
		req := ipvs.Request{Cmd: cmd}
		if a, ok := top[1]; ok {
			s, ok := parseService(a)
			if !ok {
				k.ack(h, unix.EINVAL)
				return
			}
			req.Service = &s
		}
		if a, ok := top[2]; ok {
			var svcFamily ipvs.Family
			if req.Service != nil {
				svcFamily = req.Service.Family
			}
			d := parseDest(a, svcFamily)
			req.Dest = &d
		}
		if a, ok := top[3]; ok {
			d := parseDaemon(a, cmd == ipvs.CmdNewDaemon)
			req.Daemon = &d
		}
		if top.has(4) || top.has(5) || top.has(6) {
			req.Timeouts = &ipvs.Timeouts{TCP: top.u32(4), TCPFin: top.u32(5), UDP: top.u32(6)}
		}
		err := k.fake.Exec(req)
		if k.swallow[cmd] {
			return
		}
		k.ack(h, errnoOf(err))
	}
}

// dump answers a dump request: perDump messages per datagram, then DONE.
func (k *fakeKernel) dump(h hdr, n int, fill func(w *msgWriter, i int)) {
	var dgram []byte
	for i := range n {
		var w msgWriter
		fill(&w, i)
		dgram = append(dgram, w.finish()...)
		if (i+1)%k.perDump == 0 {
			k.queue = append(k.queue, dgram)
			dgram = nil
		}
	}
	done := make([]byte, 20)
	ne.PutUint32(done, 20)
	ne.PutUint16(done[4:], nlmsgDone)
	ne.PutUint16(done[6:], nlmFMulti)
	ne.PutUint32(done[8:], h.seq)
	ne.PutUint32(done[12:], testPort)
	k.queue = append(k.queue, append(dgram, done...))
}

func errnoOf(err error) unix.Errno {
	if err == nil {
		return 0
	}
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}

// ---- the kernel's side of the attribute format -------------------------

type attrMap map[uint16][]byte

func (a attrMap) has(t uint16) bool { _, ok := a[t]; return ok }

func (a attrMap) u32(t uint16) uint32 {
	if v := a[t]; len(v) >= 4 {
		return ne.Uint32(v)
	}
	return 0
}

func (a attrMap) u16(t uint16) uint16 {
	if v := a[t]; len(v) >= 2 {
		return ne.Uint16(v)
	}
	return 0
}

func (a attrMap) be16(t uint16) uint16 {
	if v := a[t]; len(v) >= 2 {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func parseAttrs(b []byte) attrMap {
	m := attrMap{}
	for len(b) >= 4 {
		l := int(ne.Uint16(b))
		if l < 4 || l > len(b) {
			break
		}
		m[ne.Uint16(b[2:])&0x3fff] = b[4:l]
		b = b[min((l+3)&^3, len(b)):]
	}
	return m
}

func cstr(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func inet(b []byte, family ipvs.Family) netip.Addr {
	if len(b) < 16 {
		return netip.Addr{}
	}
	if family == ipvs.AFInet6 {
		return netip.AddrFrom16([16]byte(b))
	}
	return netip.AddrFrom4([4]byte(b[:4]))
}

// parseService follows ip_vs_genl_parse_service.
func parseService(b []byte) (ipvs.Service, bool) {
	a := parseAttrs(b)
	if !a.has(1) || !(a.has(5) || (a.has(2) && a.has(3) && a.has(4))) {
		return ipvs.Service{}, false
	}
	s := ipvs.Service{Family: ipvs.Family(a.u16(1))}
	if a.has(5) {
		s.FWMark = a.u32(5)
	} else {
		s.Protocol, s.Addr, s.Port = ipvs.Protocol(a.u16(2)), inet(a[3], s.Family), a.be16(4)
	}
	s.Scheduler, s.PEName = cstr(a[6]), cstr(a[11])
	if f := a[7]; len(f) == 8 {
		s.Flags = ipvs.ServiceFlags(ne.Uint32(f) & ne.Uint32(f[4:]))
	}
	s.Timeout = a.u32(8)
	if nm := a[9]; len(nm) == 4 {
		s.Netmask = binary.BigEndian.Uint32(nm) // __be32 in the kernel
		if s.Family == ipvs.AFInet6 {
			s.Netmask = ne.Uint32(nm) // used as a plain prefix length
		}
	}
	return s, true
}

// parseDest follows ip_vs_genl_parse_dest; a missing family stays 0 (the
// kernel then uses the service's, which also decides the address length).
func parseDest(b []byte, svcFamily ipvs.Family) ipvs.Destination {
	a := parseAttrs(b)
	d := ipvs.Destination{Family: ipvs.Family(a.u16(11)), Port: a.be16(2), FwdMethod: ipvs.FwdMethod(a.u32(3)), Weight: a.u32(4),
		UThreshold: a.u32(5), LThreshold: a.u32(6), TunPort: a.be16(14), TunFlags: ipvs.TunFlags(a.u16(15))}
	if v := a[13]; len(v) >= 1 {
		d.TunType = ipvs.TunType(v[0])
	}
	family := d.Family
	if family == 0 {
		family = svcFamily
	}
	d.Addr = inet(a[1], family)
	return d
}

func parseDaemon(b []byte, start bool) ipvs.Daemon {
	a := parseAttrs(b)
	d := ipvs.Daemon{State: ipvs.DaemonState(a.u32(1)), Interface: cstr(a[2]), SyncID: a.u32(3)}
	if start {
		d.MaxLen, d.Port = a.u16(4), a.u16(7)
		if v := a[8]; len(v) >= 1 {
			d.TTL = v[0]
		}
		if v := a[5]; len(v) == 4 {
			d.Group = netip.AddrFrom4([4]byte(v))
		} else if v := a[6]; len(v) == 16 {
			d.Group = netip.AddrFrom16([16]byte(v))
		}
	}
	return d
}

type msgWriter struct{ b []byte }

func (w *msgWriter) start(typ, flags uint16, seq uint32, cmd uint8) {
	w.b = make([]byte, 20, 256)
	ne.PutUint16(w.b[4:], typ)
	ne.PutUint16(w.b[6:], flags)
	ne.PutUint32(w.b[8:], seq)
	ne.PutUint32(w.b[12:], testPort)
	w.b[16], w.b[17] = cmd, 1
}

func (w *msgWriter) finish() []byte {
	ne.PutUint32(w.b, uint32(len(w.b)))
	return w.b
}

func (w *msgWriter) put(t uint16, v []byte) {
	h := make([]byte, 4)
	ne.PutUint16(h, uint16(4+len(v)))
	ne.PutUint16(h[2:], t)
	w.b = append(append(w.b, h...), v...)
	for len(w.b)%4 != 0 {
		w.b = append(w.b, 0)
	}
}

func (w *msgWriter) u8(t uint16, v uint8)   { w.put(t, []byte{v}) }
func (w *msgWriter) u16(t uint16, v uint16) { w.put(t, ne.AppendUint16(nil, v)) }
func (w *msgWriter) u32(t uint16, v uint32) { w.put(t, ne.AppendUint32(nil, v)) }
func (w *msgWriter) u64(t uint16, v uint64) { w.put(t, ne.AppendUint64(nil, v)) }
func (w *msgWriter) be16(t uint16, v uint16) {
	w.put(t, binary.BigEndian.AppendUint16(nil, v))
}
func (w *msgWriter) str(t uint16, s string) { w.put(t, append([]byte(s), 0)) }

func (w *msgWriter) nest(t uint16, fill func()) {
	off := len(w.b)
	w.put(t|0x8000, nil)
	fill()
	ne.PutUint16(w.b[off:], uint16(len(w.b)-off))
}

func inet16(a netip.Addr) []byte {
	b := make([]byte, 16)
	if a.Is4() {
		copy(b, a.AsSlice())
	} else if a.IsValid() {
		copy(b, a.AsSlice())
	}
	return b
}

// stats writes both nests as ip_vs_genl_fill_stats(64) do: the 32-bit one
// truncates everything but the byte counters.
func (w *msgWriter) stats(t32, t64 uint16, s ipvs.Stats) {
	v := []uint64{s.Conns, s.InPkts, s.OutPkts, s.InBytes, s.OutBytes, s.CPS, s.InPPS, s.OutPPS, s.InBPS, s.OutBPS}
	w.nest(t32, func() {
		for i, x := range v {
			if i == 3 || i == 4 {
				w.u64(uint16(i+1), x)
			} else {
				w.u32(uint16(i+1), uint32(x))
			}
		}
	})
	w.nest(t64, func() {
		for i, x := range v {
			w.u64(uint16(i+1), x)
		}
	})
}

// service follows ip_vs_genl_fill_service.
func (w *msgWriter) service(s *ipvs.ServiceEntry) {
	w.nest(1, func() {
		w.u16(1, uint16(s.Family))
		if s.FWMark != 0 {
			w.u32(5, s.FWMark)
		} else {
			w.u16(2, uint16(s.Protocol))
			w.put(3, inet16(s.Addr))
			w.be16(4, s.Port)
		}
		w.str(6, s.Scheduler)
		if s.PEName != "" {
			w.str(11, s.PEName)
		}
		flags := ne.AppendUint32(nil, uint32(s.Flags|ipvs.FlagHashed))
		w.put(7, ne.AppendUint32(flags, ^uint32(0)))
		w.u32(8, s.Timeout)
		if s.Family == ipvs.AFInet6 {
			w.u32(9, s.Netmask)
		} else {
			w.put(9, binary.BigEndian.AppendUint32(nil, s.Netmask))
		}
		w.stats(10, 12, s.Stats)
	})
}

// dest follows ip_vs_genl_fill_dest.
func (w *msgWriter) dest(d *ipvs.DestinationEntry) {
	w.nest(2, func() {
		w.put(1, inet16(d.Addr))
		w.be16(2, d.Port)
		w.u32(3, uint32(d.FwdMethod))
		w.u32(4, d.Weight)
		w.u8(13, uint8(d.TunType))
		w.be16(14, d.TunPort)
		w.u16(15, uint16(d.TunFlags))
		w.u32(5, d.UThreshold)
		w.u32(6, d.LThreshold)
		w.u32(7, d.ActiveConns)
		w.u32(8, d.InactConns)
		w.u32(9, d.PersistConns)
		w.u16(11, uint16(d.Family))
		w.stats(10, 12, d.Stats)
	})
}

// daemon follows ip_vs_genl_fill_daemon.
func (w *msgWriter) daemon(d *ipvs.Daemon) {
	w.nest(3, func() {
		w.u32(1, uint32(d.State))
		w.str(2, d.Interface)
		w.u32(3, d.SyncID)
		w.u16(4, d.MaxLen)
		w.u16(7, d.Port)
		w.u8(8, d.TTL)
		if d.Group.Is6() {
			w.put(6, d.Group.AsSlice())
		} else if d.Group.IsValid() {
			w.put(5, d.Group.AsSlice())
		}
	})
}
