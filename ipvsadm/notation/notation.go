// Package notation is how ipvsadm writes what the kernel holds.
//
// It names protocols, forwarding methods, tunnels and scheduler flags, and
// writes options and columns, numeric addresses, persistence masks and
// fwmark designators. Listings, the rules text, lvsctl and lvsprep share it,
// so each name is written once.
package notation

import (
	"net/netip"
	"strconv"

	"github.com/lvskit/lvskit/ipvs"
)

// Addr16 returns addr as the kernel's 16-byte union nf_inet_addr: an IPv4
// address fills the first four bytes, the rest stays zero. An invalid
// address (fwmark services) is all zeros.
func Addr16(addr netip.Addr) [16]byte {
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

// Protocol is the one place the protocols ipvsadm knows are named.
func Protocol(proto ipvs.Protocol) ProtocolText {
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

// AppendAddr appends the address text glibc's inet_ntop gives for raw
// read as an address of the given family (anything but AF_INET is IPv6).
func AppendAddr(b []byte, family ipvs.Family, raw [16]byte) []byte {
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
// as strconv.AppendUint(b, w, 16) does, but cheaper: an IPv6 listing
// formats eight words an address (figures: decision 0007).
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
func AppendSchedFlags(b []byte, scheduler string, flags ipvs.ServiceFlags) []byte {
	var texts [3]string
	switch scheduler {
	case "sh":
		texts = [3]string{"sh-fallback", "sh-port", ""}
	case "mh":
		texts = [3]string{"mh-fallback", "mh-port", ""}
	default:
		texts = [3]string{"flag-1", "flag-2", "flag-3"}
	}
	bits := [3]ipvs.ServiceFlags{ipvs.FlagSched1, ipvs.FlagSched2, ipvs.FlagSched3}
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
func HasSchedFlags(flags ipvs.ServiceFlags) bool {
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

// Method is the one place forwarding methods are named; methods
// without a name print as glibc prints a NULL string.
func Method(fwd ipvs.FwdMethod) FwdText {
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

// TunCsum is the one place checksum flags are named; other values
// print as glibc prints a NULL string.
func TunCsum(flags ipvs.TunFlags) TunCsumText {
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

// AppendFWMark appends an fwmark service's designator as ipvsadm writes
// it: mark, the mark as a signed number, then ipv6 for an IPv6 service.
func AppendFWMark(b []byte, svc *ipvs.Service, mark, ipv6 string) []byte {
	b = append(b, mark...)
	b = strconv.AppendInt(b, int64(int32(svc.FWMark)), 10)
	if svc.Family == ipvs.AFInet6 {
		b = append(b, ipv6...)
	}
	return b
}

// AppendAddrPort appends a numeric address and port as ipvsadm -n writes
// them: "a.b.c.d:port", or "[v6]:port" for any other family.
func AppendAddrPort(b []byte, family ipvs.Family, addr netip.Addr, port uint16) []byte {
	if family != ipvs.AFInet {
		b = append(b, '[')
		b = AppendAddr(b, family, Addr16(addr))
		b = append(b, ']')
	} else {
		b = AppendAddr(b, family, Addr16(addr))
	}
	b = append(b, ':')
	return strconv.AppendUint(b, uint64(port), 10)
}

// protocols are the protocols ipvsadm knows, in its order.
var protocols = [...]ipvs.Protocol{ipvs.ProtoTCP, ipvs.ProtoUDP, ipvs.ProtoSCTP}

// methods are the forwarding methods ipvsadm names.
var methods = [...]ipvs.FwdMethod{ipvs.FwdMasq, ipvs.FwdLocal, ipvs.FwdTunnel, ipvs.FwdRoute}

// ProtocolNamed is the protocol whose name (ipvs.Protocol.String: "tcp")
// or listing column ("TCP") is name.
func ProtocolNamed(name string) (ipvs.Protocol, bool) {
	for _, p := range protocols {
		if name == p.String() || name == Protocol(p).Column {
			return p, true
		}
	}
	return 0, false
}

// MethodNamed is the forwarding method whose name (ipvs.FwdMethod.String:
// "masq") or listing column ("Masq") is name.
func MethodNamed(name string) (ipvs.FwdMethod, bool) {
	for _, m := range methods {
		if name == m.String() || name == Method(m).Column {
			return m, true
		}
	}
	return 0, false
}

// SchedFlagNames names each SCHED1..3 bit of flags as ipvsadm's -b
// accepts it: the scheduler's own name where it has one (mh-port),
// flag-N otherwise.
func SchedFlagNames(scheduler string, flags ipvs.ServiceFlags) []string {
	var out []string
	for i, bit := range [...]ipvs.ServiceFlags{ipvs.FlagSched1, ipvs.FlagSched2, ipvs.FlagSched3} {
		if flags&bit == 0 {
			continue
		}
		name := string(AppendSchedFlags(nil, scheduler, bit))
		if name == "" {
			name = "flag-" + strconv.Itoa(i+1)
		}
		out = append(out, name)
	}
	return out
}
