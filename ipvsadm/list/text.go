package list

import (
	"net/netip"
	"strconv"
	"sync"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/names"
)

// addrPortMax is the longest address:port text ipvsadm produces: it formats
// into a 60-byte buffer, so anything longer is cut to 59 characters.
const addrPortMax = 59

// Cuts ipvsadm applies to non-IPv6 names in listings (not in -S or -c).
const (
	serviceNameCut = 33
	destNameCut    = 28
)

var (
	systemResolverOnce sync.Once
	systemResolver     *names.Resolver
)

// resolver returns o.Resolver, or the system resolver when none is set.
func (o *Options) resolver() *names.Resolver {
	if o.Resolver != nil {
		return o.Resolver
	}
	systemResolverOnce.Do(func() { systemResolver = names.NewResolver() })
	return systemResolver
}

// addr16 returns addr as the kernel's 16-byte union nf_inet_addr: an IPv4
// address fills the first four bytes, the rest stays zero. An invalid
// address (fwmark services) is all zeros.
func addr16(addr netip.Addr) [16]byte {
	var b [16]byte
	switch {
	case addr.Is4():
		a4 := addr.As4()
		copy(b[:], a4[:])
	case addr.Is6():
		b = addr.As16()
	}
	return b
}

// ProtocolText is how ipvsadm writes an IP protocol.
type ProtocolText struct {
	// Column is the listing's protocol column ("TCP"; "?" when unknown).
	Column string
	// Services is the /etc/services protocol ("tcp"), "" when ipvsadm
	// never looks names up for it.
	Services string
	// Option is the rule option naming a service ("-t"); ipvsadm writes
	// the unusable "--xxx-service" for protocols it does not know.
	Option string
}

// TextOf is the one place the protocols ipvsadm knows are named.
func TextOf(proto ipvs.Protocol) ProtocolText {
	switch proto {
	case ipvs.ProtoTCP:
		return ProtocolText{"TCP", ipvs.ProtoTCP.String(), "-t"}
	case ipvs.ProtoUDP:
		return ProtocolText{"UDP", ipvs.ProtoUDP.String(), "-u"}
	case ipvs.ProtoSCTP:
		return ProtocolText{"SCTP", ipvs.ProtoSCTP.String(), "--sctp-service"}
	}
	return ProtocolText{"?", "", "--xxx-service"}
}

// AppendAddrPort appends ipvsadm's address:port text (addrport_to_anyname)
// for an address of the given family: "a.b.c.d:port" or "[v6]:port", with
// the host name (canonical name from a reverse lookup) and the service name
// for proto (from /etc/services) instead of numbers unless o.Numeric. The
// text is cut to 59 characters.
func AppendAddrPort(b []byte, family ipvs.Family, addr netip.Addr, port uint16, proto ipvs.Protocol, o *Options) []byte {
	start := len(b)
	bracket := family != ipvs.AFInet
	if bracket {
		b = append(b, '[')
	}
	raw := addr16(addr)
	named := false
	if !o.Numeric {
		var lookup netip.Addr
		if family == ipvs.AFInet {
			lookup = netip.AddrFrom4([4]byte(raw[:4]))
		} else {
			lookup = netip.AddrFrom16(raw)
		}
		if name, ok := o.resolver().LookupAddr(lookup); ok {
			b = append(b, name...)
			named = true
		}
	}
	if !named {
		b = appendInetNtop(b, family, raw)
	}
	if bracket {
		b = append(b, ']')
	}
	b = append(b, ':')
	portNamed := false
	if !o.Numeric {
		if p := TextOf(proto).Services; p != "" {
			if name, ok := o.resolver().ServiceName(port, p); ok {
				b = append(b, name...)
				portNamed = true
			}
		}
	}
	if !portNamed {
		b = strconv.AppendUint(b, uint64(port), 10)
	}
	if len(b)-start > addrPortMax {
		b = b[:start+addrPortMax]
	}
	return b
}

// appendInetNtop appends the address text glibc's inet_ntop gives for raw
// read as an address of the given family (anything but AF_INET is IPv6).
func appendInetNtop(b []byte, family ipvs.Family, raw [16]byte) []byte {
	if family == ipvs.AFInet {
		return appendDotted(b, raw[0], raw[1], raw[2], raw[3])
	}
	return appendInet6Ntop(b, raw)
}

func appendDotted(b []byte, a, c, d, e byte) []byte {
	b = appendOctet(b, a)
	b = append(b, '.')
	b = appendOctet(b, c)
	b = append(b, '.')
	b = appendOctet(b, d)
	b = append(b, '.')
	return appendOctet(b, e)
}

// appendOctet appends a byte in decimal; addresses are most of a listing,
// so this avoids the general conversion.
func appendOctet(b []byte, v byte) []byte {
	switch {
	case v >= 100:
		return append(b, '0'+v/100, '0'+v/10%10, '0'+v%10)
	case v >= 10:
		return append(b, '0'+v/10, '0'+v%10)
	}
	return append(b, '0'+v)
}

// appendInet6Ntop formats an IPv6 address as glibc's inet_ntop does. It
// differs from netip.Addr.String in one case: an address whose first 96
// bits are zero and whose next word is not (an "IPv4-compatible" address)
// ends in dotted-quad form, e.g. ::1.2.3.4.
func appendInet6Ntop(b []byte, raw [16]byte) []byte {
	var words [8]uint16
	for i := range words {
		words[i] = uint16(raw[2*i])<<8 | uint16(raw[2*i+1])
	}
	// Find the first longest run of zero words (length >= 2).
	bestBase, bestLen := -1, 0
	curBase, curLen := -1, 0
	for i, w := range words {
		if w == 0 {
			if curBase < 0 {
				curBase, curLen = i, 1
			} else {
				curLen++
			}
			continue
		}
		if curBase >= 0 && (bestBase < 0 || curLen > bestLen) {
			bestBase, bestLen = curBase, curLen
		}
		curBase = -1
	}
	if curBase >= 0 && (bestBase < 0 || curLen > bestLen) {
		bestBase, bestLen = curBase, curLen
	}
	if bestLen < 2 {
		bestBase = -1
	}
	for i := 0; i < 8; i++ {
		if bestBase >= 0 && i >= bestBase && i < bestBase+bestLen {
			if i == bestBase {
				b = append(b, ':')
			}
			continue
		}
		if i != 0 {
			b = append(b, ':')
		}
		if i == 6 && bestBase == 0 && (bestLen == 6 || (bestLen == 5 && words[5] == 0xffff)) {
			return appendDotted(b, raw[12], raw[13], raw[14], raw[15])
		}
		b = appendHex16(b, words[i])
	}
	if bestBase >= 0 && bestBase+bestLen == 8 {
		b = append(b, ':')
	}
	return b
}

// appendHex16 appends w in lower-case hexadecimal without leading zeros,
// as strconv.AppendUint(b, w, 16) does, at a third of its cost (an IPv6
// listing formats eight words an address).
func appendHex16(b []byte, w uint16) []byte {
	const digits = "0123456789abcdef"
	switch {
	case w >= 0x1000:
		return append(b, digits[w>>12], digits[w>>8&15], digits[w>>4&15], digits[w&15])
	case w >= 0x100:
		return append(b, digits[w>>8], digits[w>>4&15], digits[w&15])
	case w >= 0x10:
		return append(b, digits[w>>4], digits[w&15])
	}
	return append(b, digits[w])
}

// AppendSchedFlags appends the scheduler-flag text ipvsadm shows for the
// SCHED1..3 bits of flags: sh-fallback/sh-port for sh, mh-fallback/mh-port
// for mh, flag-1..3 for any other scheduler, comma-separated. Bits without a
// name for the scheduler are skipped, so the text can be empty.
func AppendSchedFlags(b []byte, scheduler string, flags uint32) []byte {
	var texts [3]string
	switch scheduler {
	case "sh":
		texts = [3]string{"sh-fallback", "sh-port", ""}
	case "mh":
		texts = [3]string{"mh-fallback", "mh-port", ""}
	default:
		texts = [3]string{"flag-1", "flag-2", "flag-3"}
	}
	bits := [3]uint32{ipvs.FlagSched1, ipvs.FlagSched2, ipvs.FlagSched3}
	first := true
	for i, bit := range bits {
		if flags&bit == 0 || texts[i] == "" {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		b = append(b, texts[i]...)
		first = false
	}
	return b
}

// HasSchedFlags reports whether any scheduler-flag bit is set; ipvsadm then
// prints the flag text (even an empty one).
func HasSchedFlags(flags uint32) bool {
	return flags&(ipvs.FlagSched1|ipvs.FlagSched2|ipvs.FlagSched3) != 0
}

// AppendPersistence appends the persistence mask the way both listings and
// -S show it, after the word given as keyword (" mask " or " -M "): for IPv4
// services a dotted quad unless it is 255.255.255.255, for IPv6 services the
// prefix length unless it is 128.
func AppendPersistence(b []byte, svc *ipvs.Service, keyword string) []byte {
	switch svc.Family {
	case ipvs.AFInet:
		if svc.Netmask != 0xffffffff {
			m := svc.Netmask
			b = append(b, keyword...)
			b = appendDotted(b, byte(m>>24), byte(m>>16), byte(m>>8), byte(m))
		}
	case ipvs.AFInet6:
		if svc.Netmask != 128 {
			b = append(b, keyword...)
			b = strconv.AppendInt(b, int64(int32(svc.Netmask)), 10)
		}
	}
	return b
}

// FwdText is how ipvsadm writes a forwarding method.
type FwdText struct {
	// Column is the listing's Forward column ("Masq").
	Column string
	// Option is the rule option (-S); local counts as -g.
	Option string
}

// FwdTextOf is the one place forwarding methods are named; methods
// without a name print as glibc prints a NULL string.
func FwdTextOf(fwd ipvs.FwdMethod) FwdText {
	switch fwd & 7 {
	case ipvs.FwdMasq:
		return FwdText{"Masq", "-m"}
	case ipvs.FwdLocal:
		return FwdText{"Local", "-g"}
	case ipvs.FwdTunnel:
		return FwdText{"Tunnel", "-i"}
	case ipvs.FwdRoute:
		return FwdText{"Route", "-g"}
	}
	return FwdText{"(null)", "(null)"}
}

// TunTypeName is a tunnel type's name as -S and --tun-info write it
// (ipvs.TunType's); false for a type ipvsadm 1.31 does not know.
func TunTypeName(t ipvs.TunType) (string, bool) {
	switch t {
	case ipvs.TunIPIP, ipvs.TunGUE, ipvs.TunGRE:
		return t.String(), true
	}
	return "", false
}

// TunCsumText is how ipvsadm writes a tunnel's checksum flags.
type TunCsumText struct {
	// Info is the --tun-info column's part ("-c").
	Info string
	// Option is the rule option ("--tun-nocsum").
	Option string
}

// TunCsumTextOf is the one place checksum flags are named; other values
// print as glibc prints a NULL string.
func TunCsumTextOf(flags uint16) TunCsumText {
	switch flags {
	case ipvs.TunFlagNoCsum:
		return TunCsumText{"-c", "--tun-nocsum"}
	case ipvs.TunFlagCsum:
		return TunCsumText{"+c", "--tun-csum"}
	case ipvs.TunFlagRemCsum:
		return TunCsumText{"r+c", "--tun-remcsum"}
	}
	return TunCsumText{"(null)", "(null)"}
}

// appendTunInfo appends the --tun-info column text: n/a for non-tunnel
// destinations and unknown tunnel types, else ipip, gue:<port>:<csum> or
// gre:<csum> (cut to 15 characters like ipvsadm's 16-byte buffer).
func appendTunInfo(b []byte, d *ipvs.Destination) []byte {
	name, ok := TunTypeName(d.TunType)
	if d.FwdMethod&7 != ipvs.FwdTunnel || !ok {
		return append(b, "n/a"...)
	}
	start := len(b)
	b = append(b, name...)
	switch d.TunType {
	case ipvs.TunGUE:
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(d.TunPort), 10)
		b = append(b, ':')
		b = append(b, TunCsumTextOf(d.TunFlags).Info...)
	case ipvs.TunGRE:
		b = append(b, ':')
		b = append(b, TunCsumTextOf(d.TunFlags).Info...)
	}
	if len(b)-start > 15 {
		b = b[:start+15]
	}
	return b
}

// appendPadded appends s left-justified in width columns (C's %-*s).
func appendPadded(b []byte, s string, width int) []byte {
	b = append(b, s...)
	return appendSpaces(b, width-len(s))
}

// padTo pads b with spaces so that the text after start is width wide.
func padTo(b []byte, start, width int) []byte {
	return appendSpaces(b, width-(len(b)-start))
}

func appendSpaces(b []byte, n int) []byte {
	for ; n > 0; n-- {
		b = append(b, ' ')
	}
	return b
}

// appendUintLeft appends v left-justified in width columns (%-*u).
func appendUintLeft(b []byte, v uint64, width int) []byte {
	start := len(b)
	b = strconv.AppendUint(b, v, 10)
	return padTo(b, start, width)
}

// appendIntLeft appends v left-justified in width columns (%-*d).
func appendIntLeft(b []byte, v int64, width int) []byte {
	start := len(b)
	b = strconv.AppendInt(b, v, 10)
	return padTo(b, start, width)
}

// appendUintRight appends v right-justified in width columns (%*llu).
func appendUintRight(b []byte, v uint64, width int) []byte {
	var digits [20]byte
	d := strconv.AppendUint(digits[:0], v, 10)
	b = appendSpaces(b, width-len(d))
	return append(b, d...)
}

// appendLargeNum appends a counter the way ipvsadm's print_largenum does:
// 9 columns, scaled with K (only from 10^8 to 10^9-1), M, G or T, or with
// exact set the full number in max(9, digits+1) columns.
func appendLargeNum(b []byte, v uint64, exact bool) []byte {
	if exact {
		var digits [20]byte
		d := strconv.AppendUint(digits[:0], v, 10)
		width := 9
		if len(d) > 8 {
			width = len(d) + 1
		}
		b = appendSpaces(b, width-len(d))
		return append(b, d...)
	}
	switch {
	case v < 100_000_000:
		return appendUintRight(b, v, 9)
	case v < 1_000_000_000:
		return append(appendUintRight(b, v/1_000, 8), 'K')
	case v < 100_000_000_000:
		return append(appendUintRight(b, v/1_000_000, 8), 'M')
	case v < 100_000_000_000_000:
		return append(appendUintRight(b, v/1_000_000_000, 8), 'G')
	}
	return append(appendUintRight(b, v/1_000_000_000_000, 8), 'T')
}
