package ipvs

// The generic netlink wire format of the IPVS family: message and attribute
// framing, the request encoders and the reply decoders. Nothing here does
// I/O, so the host tests can check the exact bytes without a kernel.
//
// Numbers come from the kernel's include/uapi/linux/ip_vs.h and
// include/uapi/linux/netlink.h / genetlink.h. Byte orders follow what
// ipvsadm 1.31 (libipvs) sends: ports in network order, the IPv4 persistence
// netmask as address bytes, everything else in host order.

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
)

var native = binary.NativeEndian

// Netlink framing.
const (
	nlmsgHdrLen  = 16 // struct nlmsghdr
	genlHdrLen   = 4  // struct genlmsghdr
	nlaHdrLen    = 4  // struct nlattr
	nlmsgErrLen  = 4 + nlmsgHdrLen
	nlaFNested   = 0x8000
	nlaTypeMask  = 0x3fff // strips NLA_F_NESTED and NLA_F_NET_BYTEORDER
	nlmsgError   = 2      // NLMSG_ERROR
	nlmsgDone    = 3      // NLMSG_DONE
	nlmFRequest  = 0x1
	nlmFMulti    = 0x2
	nlmFAck      = 0x4
	nlmFDump     = 0x300 // NLM_F_ROOT|NLM_F_MATCH
	genlIDCtrl   = 0x10  // GENL_ID_CTRL
	ctrlCmdGetFm = 3     // CTRL_CMD_GETFAMILY
	ctrlAttrID   = 1     // CTRL_ATTR_FAMILY_ID
	ctrlAttrName = 2     // CTRL_ATTR_FAMILY_NAME

	ipvsGenlName    = "IPVS"
	ipvsGenlVersion = 1
)

// IPVS_CMD_ATTR_*: top-level attributes.
const (
	cmdAttrService    = 1
	cmdAttrDest       = 2
	cmdAttrDaemon     = 3
	cmdAttrTimeoutTCP = 4
	cmdAttrTimeoutFin = 5
	cmdAttrTimeoutUDP = 6
)

// IPVS_INFO_ATTR_*.
const (
	infoAttrVersion     = 1
	infoAttrConnTabSize = 2
)

// IPVS_SVC_ATTR_*.
const (
	svcAttrAF        = 1
	svcAttrProtocol  = 2
	svcAttrAddr      = 3
	svcAttrPort      = 4
	svcAttrFWMark    = 5
	svcAttrSchedName = 6
	svcAttrFlags     = 7
	svcAttrTimeout   = 8
	svcAttrNetmask   = 9
	svcAttrStats     = 10
	svcAttrPEName    = 11
	svcAttrStats64   = 12
	svcAttrMax       = 12
)

// IPVS_DEST_ATTR_*.
const (
	destAttrAddr         = 1
	destAttrPort         = 2
	destAttrFwdMethod    = 3
	destAttrWeight       = 4
	destAttrUThresh      = 5
	destAttrLThresh      = 6
	destAttrActiveConns  = 7
	destAttrInactConns   = 8
	destAttrPersistConns = 9
	destAttrStats        = 10
	destAttrAddrFamily   = 11
	destAttrStats64      = 12
	destAttrTunType      = 13
	destAttrTunPort      = 14
	destAttrTunFlags     = 15
	destAttrMax          = 15
)

// IPVS_DAEMON_ATTR_*.
const (
	daemonAttrState      = 1
	daemonAttrMcastIfn   = 2
	daemonAttrSyncID     = 3
	daemonAttrSyncMaxLen = 4
	daemonAttrMcastGroup = 5
	daemonAttrMcastGrp6  = 6
	daemonAttrMcastPort  = 7
	daemonAttrMcastTTL   = 8
	daemonAttrMax        = 8
)

// IPVS_STATS_ATTR_*: the same numbers inside STATS and STATS64 nests.
const (
	statsAttrConns    = 1
	statsAttrInPkts   = 2
	statsAttrOutPkts  = 3
	statsAttrInBytes  = 4
	statsAttrOutBytes = 5
	statsAttrCPS      = 6
	statsAttrInPPS    = 7
	statsAttrOutPPS   = 8
	statsAttrInBPS    = 9
	statsAttrOutBPS   = 10
	statsAttrMax      = 10
)

// builder appends netlink messages to a reusable buffer. Several messages
// may follow each other in one buffer (a pipelined batch).
type builder struct {
	b     []byte
	start int // offset of the message being built
	// alike is the last destination request encoded in full: the next
	// one that differs from it only in the destination's address and
	// port is a copy of its bytes with those patched (see request).
	alike alikeDest
}

// alikeDest is a destination request kept as encoded bytes.
type alikeDest struct {
	ok            bool
	cmd           Op
	family, flags uint16
	svc           Service
	dest          Destination
	msg           []byte
	addrAt        int // the address's payload in msg; the port's follows at portFromAddr
}

// portFromAddr is how far the DEST nest's port payload lies after its
// address payload: the address (16 bytes), then the port attribute's
// header.
const portFromAddr = 16 + nlaHdrLen

// begin starts a message; for a generic netlink message cmd and version
// form the genl header (typ is then the family id).
func (m *builder) begin(typ, flags uint16, seq uint32, cmd, version uint8) {
	m.start = len(m.b)
	h := m.put(nlmsgHdrLen + genlHdrLen)
	clear(h)
	native.PutUint16(h[4:], typ)
	native.PutUint16(h[6:], flags)
	native.PutUint32(h[8:], seq)
	// nlmsg_pid 0: the kernel fills in the sender's port id.
	h[16] = cmd
	h[17] = version
}

// end fixes the current message's length.
func (m *builder) end() {
	native.PutUint32(m.b[m.start:], uint32(len(m.b)-m.start))
}

// put extends the buffer by n bytes and returns them to be filled in:
// one length check per attribute instead of one per append.
func (m *builder) put(n int) []byte {
	l := len(m.b)
	if cap(m.b)-l < n {
		m.b = slices.Grow(m.b, n)
	}
	m.b = m.b[:l+n]
	return m.b[l : l+n : l+n]
}

// header puts an attribute header for a payload of n bytes and returns
// the attribute's bytes, payload and padding included. The padding is
// zeroed; the caller writes every payload byte (the buffer is reused and
// holds old bytes).
func (m *builder) header(typ uint16, n int) []byte {
	a := m.put(nlaHdrLen + (n+3)&^3)
	native.PutUint16(a, uint16(nlaHdrLen+n))
	native.PutUint16(a[2:], typ)
	for i := nlaHdrLen + n; i < len(a); i++ {
		a[i] = 0
	}
	return a
}

func (m *builder) attr(typ uint16, payload []byte) {
	copy(m.header(typ, len(payload))[nlaHdrLen:], payload)
}

func (m *builder) u8(typ uint16, v uint8) {
	m.header(typ, 1)[nlaHdrLen] = v
}

func (m *builder) u16(typ uint16, v uint16) {
	native.PutUint16(m.header(typ, 2)[nlaHdrLen:], v)
}

// be16 is a u16 attribute in network byte order (ports).
func (m *builder) be16(typ uint16, v uint16) {
	binary.BigEndian.PutUint16(m.header(typ, 2)[nlaHdrLen:], v)
}

func (m *builder) u32(typ uint16, v uint32) {
	native.PutUint32(m.header(typ, 4)[nlaHdrLen:], v)
}

func (m *builder) be32(typ uint16, v uint32) {
	binary.BigEndian.PutUint32(m.header(typ, 4)[nlaHdrLen:], v)
}

// str is a NUL-terminated string attribute (NLA_PUT_STRING).
func (m *builder) str(typ uint16, s string) {
	a := m.header(typ, len(s)+1)
	copy(a[nlaHdrLen:], s)
	a[nlaHdrLen+len(s)] = 0
}

// addr is a 16-byte union nf_inet_addr: IPv4 in the first four bytes.
func (m *builder) addr(typ uint16, a netip.Addr, family Family) {
	putAddr((*[16]byte)(m.header(typ, 16)[nlaHdrLen:]), a, family)
}

func putAddr(raw *[16]byte, a netip.Addr, family Family) {
	*raw = [16]byte{}
	switch {
	case !a.IsValid():
	case family == AFInet6 && a.Is6():
		*raw = a.As16()
	case a.Is4() || a.Is4In6():
		v4 := a.Unmap().As4()
		copy(raw[:], v4[:])
	default:
		*raw = a.As16()
	}
}

// nest starts a nested attribute; pass its result to endNest.
func (m *builder) nest(typ uint16) int {
	off := len(m.b)
	m.header(typ|nlaFNested, 0)
	return off
}

func (m *builder) endNest(off int) {
	native.PutUint16(m.b[off:], uint16(len(m.b)-off))
}

// serviceIdentity writes what identifies a service: the family and either
// the fwmark or protocol, address and port.
func (m *builder) serviceIdentity(s *Service) {
	m.u16(svcAttrAF, uint16(s.Family))
	if s.FWMark != 0 {
		m.u32(svcAttrFWMark, s.FWMark)
		return
	}
	m.u16(svcAttrProtocol, uint16(s.Protocol))
	m.addr(svcAttrAddr, s.Addr, s.Family)
	m.be16(svcAttrPort, s.Port)
}

// service writes the full SERVICE nest exactly as libipvs's
// ipvs_nl_fill_service_attr does, attribute for attribute.
func (m *builder) service(s *Service) {
	n := m.nest(cmdAttrService)
	m.serviceIdentity(s)
	m.str(svcAttrSchedName, s.Scheduler)
	if s.PEName != "" {
		m.str(svcAttrPEName, s.PEName)
	}
	// struct ip_vs_flags {flags, mask}: a mask of all ones replaces every
	// flag, as ipvsadm's full-replacement -A/-E semantics need.
	flags := m.header(svcAttrFlags, 8)[nlaHdrLen:]
	native.PutUint32(flags, uint32(s.Flags))
	native.PutUint32(flags[4:], ^uint32(0))
	m.u32(svcAttrTimeout, s.Timeout)
	m.netmask(s.Netmask, s.Family)
	m.endNest(n)
}

// netmask appends the NETMASK attribute. The kernel keeps an IPv4 mask as
// address bytes (__be32) and an IPv6 prefix length as a plain number in the
// same field.
func (m *builder) netmask(v uint32, family Family) {
	if family == AFInet6 {
		m.u32(svcAttrNetmask, v)
		return
	}
	m.be32(svcAttrNetmask, v)
}

// dest writes the DEST nest as libipvs's ipvs_nl_fill_dest_attr does. It
// returns where the address's payload lies from the message's start (the
// port's follows at portFromAddr).
func (m *builder) dest(d *Destination) (addrAt int) {
	n := m.nest(cmdAttrDest)
	m.u16(destAttrAddrFamily, uint16(d.Family))
	addrAt = len(m.b) + nlaHdrLen - m.start
	m.addr(destAttrAddr, d.Addr, d.Family)
	m.be16(destAttrPort, d.Port)
	m.u32(destAttrFwdMethod, uint32(d.FwdMethod))
	m.u32(destAttrWeight, d.Weight)
	m.u8(destAttrTunType, uint8(d.TunType))
	m.be16(destAttrTunPort, d.TunPort)
	m.u16(destAttrTunFlags, uint16(d.TunFlags))
	m.u32(destAttrUThresh, d.UThreshold)
	m.u32(destAttrLThresh, d.LThreshold)
	m.endNest(n)
	return addrAt
}

// daemon writes the DAEMON nest. A start request carries the optional
// attributes only when set (ipvs_start_daemon); a stop request carries the
// three mandatory ones (ipvs_stop_daemon).
func (m *builder) daemon(d *Daemon, start bool) {
	n := m.nest(cmdAttrDaemon)
	m.u32(daemonAttrState, uint32(d.State))
	m.str(daemonAttrMcastIfn, d.Interface)
	m.u32(daemonAttrSyncID, d.SyncID)
	if start {
		if d.MaxLen != 0 {
			m.u16(daemonAttrSyncMaxLen, d.MaxLen)
		}
		if d.Port != 0 {
			m.u16(daemonAttrMcastPort, d.Port)
		}
		if d.TTL != 0 {
			m.u8(daemonAttrMcastTTL, d.TTL)
		}
		switch {
		case d.Group.Is6() && !d.Group.Is4In6():
			g := d.Group.As16()
			m.attr(daemonAttrMcastGrp6, g[:])
		case d.Group.IsValid():
			g := d.Group.Unmap().As4()
			m.attr(daemonAttrMcastGroup, g[:])
		}
	}
	m.endNest(n)
}

// request appends one complete IPVS request message for req.
func (m *builder) request(family uint16, flags uint16, seq uint32, req *Request) {
	m.begin(family, flags, seq, uint8(req.Cmd), ipvsGenlVersion)
	switch req.Cmd {
	case CmdNewService, CmdSetService, CmdDelService, CmdZero:
		if req.Service != nil {
			m.service(req.Service)
		}
	case CmdNewDest, CmdSetDest, CmdDelDest:
		if req.Service != nil && req.Dest != nil && m.alike.matches(family, flags, req) {
			m.b = m.b[:m.start]
			m.copyAlike(seq, req.Dest)
			return
		}
		if req.Service != nil {
			m.service(req.Service)
		}
		if req.Dest != nil {
			addrAt := m.dest(req.Dest)
			if req.Service != nil {
				m.end()
				m.alike = alikeDest{ok: true, cmd: req.Cmd, family: family, flags: flags, svc: *req.Service, dest: *req.Dest,
					msg: append(m.alike.msg[:0], m.b[m.start:]...), addrAt: addrAt}
				return
			}
		}
	case CmdNewDaemon, CmdDelDaemon:
		if req.Daemon != nil {
			m.daemon(req.Daemon, req.Cmd == CmdNewDaemon)
		}
	case CmdSetConfig:
		if t := req.Timeouts; t != nil {
			m.u32(cmdAttrTimeoutTCP, t.TCP)
			m.u32(cmdAttrTimeoutFin, t.TCPFin)
			m.u32(cmdAttrTimeoutUDP, t.UDP)
		}
	}
	m.end()
}

// matches reports whether req encodes as the kept request but for its
// destination's address and port (and its sequence number): the same
// command, flags, service and destination settings. Every address is
// written into the same 16 bytes, and every port into 2, so those values
// change no other byte.
func (k *alikeDest) matches(family, flags uint16, req *Request) bool {
	if !k.ok || k.cmd != req.Cmd || k.family != family || k.flags != flags || *req.Service != k.svc {
		return false
	}
	d := *req.Dest
	d.Addr, d.Port = k.dest.Addr, k.dest.Port
	return d == k.dest
}

// copyAlike appends the kept request with seq and d's address and port:
// a destination request of a restore is a copy of 200 bytes and three
// small writes instead of twenty attributes (BenchmarkEncodeAlike).
func (m *builder) copyAlike(seq uint32, d *Destination) {
	k := &m.alike
	m.start = len(m.b)
	msg := m.put(len(k.msg))
	copy(msg, k.msg)
	native.PutUint32(msg[8:], seq)
	putAddr((*[16]byte)(msg[k.addrAt:]), d.Addr, d.Family)
	binary.BigEndian.PutUint16(msg[k.addrAt+portFromAddr:], d.Port)
}

// attrs is a parsed attribute stream: the payload of each attribute type
// up to its maximum, like the kernel's nla_parse tables. The last occurrence
// of a type wins, as in the kernel.
type attrs [16][]byte

// parse fills a from the attribute stream b. Types above the table's
// size are ignored. It reports false when b is malformed.
func (a *attrs) parse(b []byte) bool {
	*a = attrs{}
	it := attrIter{b: b}
	for it.next() {
		if int(it.typ) < len(a) {
			a[it.typ] = it.val
		}
	}
	return !it.bad
}

// attrIter walks an attribute stream one attribute at a time, for the
// decoders that run once per listed entry and take each value as it
// comes instead of filling a table first.
type attrIter struct {
	b   []byte
	typ uint16 // the current attribute's type, flags stripped
	val []byte // and its payload
	bad bool   // the stream is malformed (next returned false early)
}

// next moves to the next attribute; false at the end or on a malformed
// attribute (then bad is set).
func (it *attrIter) next() bool {
	if len(it.b) < nlaHdrLen {
		return false
	}
	l := int(native.Uint16(it.b))
	if l < nlaHdrLen || l > len(it.b) {
		it.bad = true
		return false
	}
	it.typ = native.Uint16(it.b[2:]) & nlaTypeMask
	it.val = it.b[nlaHdrLen:l]
	it.b = it.b[min((l+3)&^3, len(it.b)):]
	return true
}

// uintAttr decodes an unsigned attribute of 1, 2, 4 or 8 bytes in host order;
// sizes are taken from the attribute so 32-bit STATS and 64-bit STATS64
// share one decoder.
func uintAttr(b []byte) uint64 {
	switch len(b) {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(native.Uint16(b))
	case 4:
		return uint64(native.Uint32(b))
	case 8:
		return native.Uint64(b)
	}
	return 0
}

func be16Attr(b []byte) uint16 {
	if len(b) < 2 {
		return 0
	}
	return binary.BigEndian.Uint16(b)
}

func strAttr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	// The names every listing repeats come back without an allocation.
	switch string(b) {
	case "":
		return ""
	case "rr":
		return "rr"
	case "wrr":
		return "wrr"
	case "lc":
		return "lc"
	case "wlc":
		return "wlc"
	case "lblc":
		return "lblc"
	case "lblcr":
		return "lblcr"
	case "dh":
		return "dh"
	case "sh":
		return "sh"
	case "sed":
		return "sed"
	case "nq":
		return "nq"
	case "fo":
		return "fo"
	case "ovf":
		return "ovf"
	case "mh":
		return "mh"
	case "none":
		return "none"
	case "sip":
		return "sip"
	case "lo":
		return "lo"
	}
	return string(b)
}

func addrAttr(b []byte, family Family) netip.Addr {
	if family == AFInet6 {
		if len(b) < 16 {
			return netip.Addr{}
		}
		return netip.AddrFrom16([16]byte(b[:16]))
	}
	if len(b) < 4 {
		return netip.Addr{}
	}
	return netip.AddrFrom4([4]byte(b[:4]))
}

// decodeStats decodes a STATS or STATS64 nest's payload into s; a
// malformed nest leaves s as it was.
func decodeStats(b []byte, s *Stats) {
	var st Stats
	field := [statsAttrMax + 1]*uint64{
		statsAttrConns: &st.Conns, statsAttrInPkts: &st.InPkts, statsAttrOutPkts: &st.OutPkts,
		statsAttrInBytes: &st.InBytes, statsAttrOutBytes: &st.OutBytes, statsAttrCPS: &st.CPS,
		statsAttrInPPS: &st.InPPS, statsAttrOutPPS: &st.OutPPS, statsAttrInBPS: &st.InBPS, statsAttrOutBPS: &st.OutBPS,
	}
	it := attrIter{b: b}
	for it.next() {
		if int(it.typ) < len(field) && field[it.typ] != nil {
			*field[it.typ] = uintAttr(it.val)
		}
	}
	if !it.bad {
		*s = st
	}
}

// decodeService decodes a SERVICE nest's payload.
func decodeService(b []byte, e *ServiceEntry, withStats bool) bool {
	var a attrs
	if !a.parse(b) || a[svcAttrAF] == nil {
		return false
	}
	*e = ServiceEntry{Service: Service{Family: Family(uintAttr(a[svcAttrAF]))}}
	s := &e.Service
	if a[svcAttrFWMark] != nil {
		s.FWMark = uint32(uintAttr(a[svcAttrFWMark]))
	} else {
		s.Protocol = Protocol(uintAttr(a[svcAttrProtocol]))
		s.Addr = addrAttr(a[svcAttrAddr], s.Family)
		s.Port = be16Attr(a[svcAttrPort])
	}
	s.Scheduler = strAttr(a[svcAttrSchedName])
	s.PEName = strAttr(a[svcAttrPEName])
	if f := a[svcAttrFlags]; len(f) >= 8 {
		s.Flags = ServiceFlags(native.Uint32(f)&native.Uint32(f[4:])) &^ FlagHashed
	}
	s.Timeout = uint32(uintAttr(a[svcAttrTimeout]))
	if nm := a[svcAttrNetmask]; len(nm) >= 4 {
		if s.Family == AFInet6 {
			s.Netmask = native.Uint32(nm)
		} else {
			s.Netmask = binary.BigEndian.Uint32(nm)
		}
	}
	switch {
	case !withStats:
	case a[svcAttrStats64] != nil:
		decodeStats(a[svcAttrStats64], &e.Stats)
	case a[svcAttrStats] != nil:
		decodeStats(a[svcAttrStats], &e.Stats)
	}
	return true
}

// decodeDest decodes a DEST nest's payload in one pass (it runs once per
// listed destination); svcFamily stands in for a missing ADDR_FAMILY
// (kernels before 3.18). As everywhere, the last occurrence of an
// attribute wins and STATS64 is preferred to STATS.
func decodeDest(b []byte, svcFamily Family, d *DestinationEntry, withStats bool) bool {
	*d = DestinationEntry{Destination: Destination{Family: svcFamily}}
	var addr, stats, stats64 []byte
	it := attrIter{b: b}
	for it.next() {
		v := it.val
		switch it.typ {
		case destAttrAddr:
			addr = v
		case destAttrAddrFamily:
			d.Family = Family(uintAttr(v))
		case destAttrPort:
			d.Port = be16Attr(v)
		case destAttrFwdMethod:
			d.FwdMethod = FwdMethod(uintAttr(v))
		case destAttrWeight:
			d.Weight = uint32(uintAttr(v))
		case destAttrTunType:
			d.TunType = TunType(uintAttr(v))
		case destAttrTunPort:
			d.TunPort = be16Attr(v)
		case destAttrTunFlags:
			d.TunFlags = TunFlags(uintAttr(v))
		case destAttrUThresh:
			d.UThreshold = uint32(uintAttr(v))
		case destAttrLThresh:
			d.LThreshold = uint32(uintAttr(v))
		case destAttrActiveConns:
			d.ActiveConns = uint32(uintAttr(v))
		case destAttrInactConns:
			d.InactConns = uint32(uintAttr(v))
		case destAttrPersistConns:
			d.PersistConns = uint32(uintAttr(v))
		case destAttrStats:
			stats = v
		case destAttrStats64:
			stats64 = v
		}
	}
	if it.bad || addr == nil {
		return false
	}
	d.Addr = addrAttr(addr, d.Family)
	switch {
	case !withStats:
	case stats64 != nil:
		decodeStats(stats64, &d.Stats)
	case stats != nil:
		decodeStats(stats, &d.Stats)
	}
	return true
}

// decodeDaemon decodes a DAEMON nest's payload.
func decodeDaemon(b []byte, d *Daemon) bool {
	var a attrs
	if !a.parse(b) || a[daemonAttrState] == nil {
		return false
	}
	*d = Daemon{
		State:     DaemonState(uintAttr(a[daemonAttrState])),
		Interface: strAttr(a[daemonAttrMcastIfn]),
		SyncID:    uint32(uintAttr(a[daemonAttrSyncID])),
		MaxLen:    uint16(uintAttr(a[daemonAttrSyncMaxLen])),
		Port:      uint16(uintAttr(a[daemonAttrMcastPort])),
		TTL:       uint8(uintAttr(a[daemonAttrMcastTTL])),
	}
	if g := a[daemonAttrMcastGroup]; len(g) >= 4 {
		d.Group = netip.AddrFrom4([4]byte(g[:4]))
	} else if g := a[daemonAttrMcastGrp6]; len(g) >= 16 {
		d.Group = netip.AddrFrom16([16]byte(g[:16]))
	}
	return true
}
