package ipvs

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"golang.org/x/sys/unix"
)

// A Conn reads IPv4 services' destinations with the kernel's first
// interface to IPVS, getsockopt(IPPROTO_IP, IP_VS_SO_GET_*) on an IPv4
// socket: one system call a service instead of a GET_DEST dump (decision
// 0010). It keeps an answer only when nothing is missing, and reads the
// service again over netlink otherwise:
//   - IPv4 services only, and only while SkipStats is on (the interface's
//     traffic counters are 32-bit);
//   - no tunnelled destination (the interface has no tunnel settings; those
//     of other destinations read as zero and are not used);
//   - the answer's length equals the service's count of destinations of
//     both families, read right after it (for services in long hash
//     chains, in bulk around a batch: legacybatch.go), since the interface
//     leaves out destinations of the other family;
//   - an answer that fills the room offered is asked again with one slot
//     more than the service's count, since it stops there without saying.
//
// A kept answer is a snapshot (the kernel writes it whole under its
// mutex), except when the service held a server of the other family and
// lost as many servers in the microseconds before the count after: the
// counts then agree, and the interface cannot show it.

// legacyTransport is the IPv4 socket the legacy requests go over. Host
// tests substitute an in-memory kernel.
type legacyTransport interface {
	// getsockopt asks the kernel opt with buf as the argument and the
	// room for the answer; the error is the kernel's unix.Errno.
	getsockopt(opt int, buf []byte) error
	close() error
}

// The legacy requests and the layout of their structures
// (include/uapi/linux/ip_vs.h) on 64-bit ABIs, where 64-bit members are
// 8-byte aligned; 32-bit programs do not use the interface (see
// openLegacySocket).
const (
	soBase        = 64 + 1024 + 64 // IP_VS_BASE_CTL
	soGetInfo     = soBase + 1     // IP_VS_SO_GET_INFO
	soGetServices = soBase + 2     // IP_VS_SO_GET_SERVICES
	soGetService  = soBase + 3     // IP_VS_SO_GET_SERVICE
	soGetDests    = soBase + 4     // IP_VS_SO_GET_DESTS

	// struct ip_vs_getinfo: version, size, num_services (IPv4 services
	// only: the kernel counts those alone for this interface).
	legacyInfoSize = 12
	// struct ip_vs_get_services: num_services, the entries from 8.
	legacyServicesHeader = 8

	// struct ip_vs_service_entry: protocol u16, addr be32 at 4, port be16
	// at 8, fwmark u32 at 12, sched_name[16], flags, timeout, netmask,
	// num_dests u32 at 44, struct ip_vs_stats_user at 48 (56 bytes).
	legacyServiceSize  = 104
	legacyServiceFlags = 32
	legacyNumDests     = 44
	// struct ip_vs_get_dests: the service's protocol, addr, port and
	// fwmark as above, num_dests u32 at 16, the entries from 24.
	legacyDestsHeader = 24
	legacyDestsCount  = 16
	// struct ip_vs_dest_entry: addr be32, port be16 at 4, conn_flags at 8,
	// weight at 12, u_threshold, l_threshold, activeconns, inactconns,
	// persistconns at 16..32, struct ip_vs_stats_user at 40.
	legacyDestSize = 96
)

// legacyUnwritten marks an entry slot the kernel did not fill: no
// destination has every connection flag set, no service every flag.
const legacyUnwritten = 0xffffffff

var hostEndian = binary.NativeEndian

// appendDestsLegacy appends svc's destinations read with the legacy
// requests, and reports false (dst unchanged) when they cannot give the
// whole answer; the caller then reads them over netlink. A kernel that
// refuses the requests (other than for a missing service) is not asked
// again.
func (c *Conn) appendDestsLegacy(dst []DestinationEntry, svc *Service) ([]DestinationEntry, bool) {
	if _, ok := legacyChain(svc); !ok || c.legacy == nil || !c.noStats {
		return dst, false
	}
	d := dst
	if !c.readLegacy(svc, func(entries []byte) bool {
		d = appendLegacyDests(dst, entries, legacyDestSize)
		return true
	}) {
		return dst, false
	}
	c.replyDatagrams = 1 // one answer, written whole under the kernel's lock
	c.legacyReads++
	return d, true
}

// readLegacy reads svc's destinations with one IP_VS_SO_GET_DESTS and
// hands the entries written (legacyDestSize bytes apart) to take, which
// must copy what it keeps: the service's count read right after them
// (destinations of both families) reuses the buffer. It reports true
// when take took them and the count equals their number; fewer written
// than that count means servers of the other family were left out, or
// the service changed.
//
// The answer is asked with room for twice the destinations the last
// service had (c.legacyGuess): what decides that it is whole is the count
// read after it, so no count is needed before unless the room was too
// small, and a table read in order costs two requests a service.
func (c *Conn) readLegacy(svc *Service, take func(entries []byte) bool) bool {
	room := max(c.legacyGuess, minLegacyRoom)
	entries, ok := c.legacyAnswer(svc, room)
	if ok && len(entries) == room*legacyDestSize {
		// More may not have fit: count them, and offer one slot more.
		var count int
		if count, ok = c.legacyCount(svc); ok {
			room = count + 1
			entries, ok = c.legacyAnswer(svc, room)
		}
	}
	written := len(entries) / legacyDestSize
	if !ok || written == room || !take(entries) {
		return false
	}
	if count, ok := c.legacyCount(svc); !ok || count != written {
		return false
	}
	c.legacyGuess = 2 * written
	return true
}

// minLegacyRoom is the least room a destinations request offers.
const minLegacyRoom = 16

// legacyAnswer asks one IP_VS_SO_GET_DESTS for svc offering room entries
// and returns the entries written, legacyDestSize bytes apart in c's
// buffer (valid until the next request). It reports false when the
// kernel refuses or a destination is tunnelled (its tunnel settings are
// needed). Every slot is marked beforehand (connection flags all ones,
// which no destination has), so the entries written are known; what the
// answer left out is for the caller to rule out.
func (c *Conn) legacyAnswer(svc *Service, room int) ([]byte, bool) {
	b := c.legacyRoom(legacyDestsHeader + room*legacyDestSize)
	clear(b[:legacyDestsHeader])
	putLegacyService(b, svc)
	hostEndian.PutUint32(b[legacyDestsCount:], uint32(room))
	for i := range room {
		hostEndian.PutUint32(b[legacyDestsHeader+i*legacyDestSize+8:], legacyUnwritten)
	}
	if !c.legacyAsk(soGetDests, b) {
		return nil, false
	}
	entries := b[legacyDestsHeader:]
	for i := range room {
		flags := hostEndian.Uint32(entries[i*legacyDestSize+8:])
		if flags == legacyUnwritten {
			return entries[:i*legacyDestSize], true
		}
		if FwdMethod(flags&7) == FwdTunnel {
			return nil, false
		}
	}
	return entries, true
}

// legacyDestUsed is how much of a legacy destination entry is decoded
// (the counters after it are not).
const legacyDestUsed = 36

// appendLegacyDests decodes legacy destination entries, stride bytes
// apart, onto dst.
func appendLegacyDests(dst []DestinationEntry, entries []byte, stride int) []DestinationEntry {
	for ; len(entries) >= legacyDestUsed; entries = entries[min(stride, len(entries)):] {
		e := entries[:legacyDestUsed]
		flags := hostEndian.Uint32(e[8:])
		dst = append(dst, DestinationEntry{
			Destination: Destination{
				Addr:       netip.AddrFrom4([4]byte(e[0:4])),
				Family:     AFInet,
				Port:       binary.BigEndian.Uint16(e[4:]),
				FwdMethod:  FwdMethod(flags & 7),
				Weight:     hostEndian.Uint32(e[12:]),
				UThreshold: hostEndian.Uint32(e[16:]),
				LThreshold: hostEndian.Uint32(e[20:]),
			},
			DestCounters: DestCounters{
				ActiveConns:  hostEndian.Uint32(e[24:]),
				InactConns:   hostEndian.Uint32(e[28:]),
				PersistConns: hostEndian.Uint32(e[32:]),
			},
		})
	}
	return dst
}

// SnapshotServiceKeys appends the identity (family, protocol, address and
// port, or fwmark) of every IPv4 service to dst, in the order a
// GET_SERVICE dump lists them, from one copy the kernel makes under its
// IPVS mutex: a snapshot, where a dump of more than one datagram is not
// (see ReplyDatagrams). IPv6 services are not in it (the legacy interface
// leaves them out). It reports false, with dst unchanged, when it cannot
// give one: no legacy interface, or a table that changed during the read
// (the number of IPv4 services is read before and after, and one slot
// more is offered). Callers then read the services again by other means.
func (c *Conn) SnapshotServiceKeys(dst []Service) ([]Service, bool) {
	if err := c.broken(CmdGetService); err != nil || c.legacy == nil {
		return dst, false
	}
	entries, count, ok := c.legacyServiceEntries(&c.legacyBuf)
	if !ok {
		return dst, false
	}
	n := len(dst)
	for e := entries; len(e) > 0; e = e[legacyServiceSize:] {
		dst = append(dst, legacyEntryService(e))
	}
	if again, ok := c.legacyServiceCount(); !ok || len(dst)-n != count || again != count {
		return dst[:n], false
	}
	return dst, true
}

// legacyServiceEntries asks one IP_VS_SO_GET_SERVICES in *buf (resized),
// offering one slot more than the kernel's count of IPv4 services, read
// right before, and returns the entries written (legacyServiceSize bytes
// apart) and that count. Each slot is marked beforehand (flags all ones,
// which no service has), so the entries written are known; more than the
// count means the table grew between the two requests.
func (c *Conn) legacyServiceEntries(buf *[]byte) (entries []byte, count int, ok bool) {
	count, ok = c.legacyServiceCount()
	if !ok {
		return nil, 0, false
	}
	room := count + 1
	*buf = resize(*buf, legacyServicesHeader+room*legacyServiceSize)
	b := *buf
	clear(b[:legacyServicesHeader])
	hostEndian.PutUint32(b, uint32(room))
	for i := range room {
		hostEndian.PutUint32(b[legacyServicesHeader+i*legacyServiceSize+legacyServiceFlags:], legacyUnwritten)
	}
	if !c.legacyAsk(soGetServices, b) {
		return nil, 0, false
	}
	entries = b[legacyServicesHeader:]
	for i := range room {
		if hostEndian.Uint32(entries[i*legacyServiceSize+legacyServiceFlags:]) == legacyUnwritten {
			return entries[:i*legacyServiceSize], count, true
		}
	}
	return entries, count, true
}

// legacyEntryService returns the identity (family, protocol, address and
// port, or fwmark) of the service in a legacy service entry.
func legacyEntryService(e []byte) Service {
	s := Service{Family: AFInet, FWMark: hostEndian.Uint32(e[12:])}
	if s.FWMark == 0 {
		s.Protocol = Protocol(hostEndian.Uint16(e[0:]))
		s.Addr = netip.AddrFrom4([4]byte(e[4:8]))
		s.Port = binary.BigEndian.Uint16(e[8:])
	}
	return s
}

// legacyServiceCount returns the number of IPv4 services (the kernel
// counts those alone for the legacy interface).
func (c *Conn) legacyServiceCount() (int, bool) {
	b := c.legacyRoom(legacyInfoSize)
	clear(b)
	if !c.legacyAsk(soGetInfo, b) {
		return 0, false
	}
	return int(hostEndian.Uint32(b[8:])), true
}

// legacyCount asks for svc's service entry and returns its number of
// destinations, of either family.
func (c *Conn) legacyCount(svc *Service) (int, bool) {
	b := c.legacyRoom(legacyServiceSize)
	clear(b)
	putLegacyService(b, svc)
	if !c.legacyAsk(soGetService, b) {
		return 0, false
	}
	return int(hostEndian.Uint32(b[legacyNumDests:])), true
}

// legacyRoom returns the Conn's legacy buffer resized to n bytes.
func (c *Conn) legacyRoom(n int) []byte {
	c.legacyBuf = resize(c.legacyBuf, n)
	return c.legacyBuf
}

// legacyAsk sends one legacy request. A missing service (ESRCH, deleted
// since the service dump) is left to netlink, which answers it as
// ipvsadm expects; any other refusal stops the legacy reads for good.
func (c *Conn) legacyAsk(opt int, b []byte) bool {
	err := c.legacy.getsockopt(opt, b)
	if err == nil {
		return true
	}
	if !errors.Is(err, unix.ESRCH) {
		c.legacy.close()
		c.legacy = nil
	}
	return false
}

// putLegacyService writes svc's identity at the start of a legacy
// service entry or destinations request (the same first 16 bytes).
func putLegacyService(b []byte, svc *Service) {
	hostEndian.PutUint16(b[0:], uint16(svc.Protocol))
	if svc.Addr.Is4() {
		a := svc.Addr.As4()
		copy(b[4:8], a[:])
	}
	binary.BigEndian.PutUint16(b[8:], svc.Port)
	hostEndian.PutUint32(b[12:], svc.FWMark)
}
