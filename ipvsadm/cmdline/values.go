package cmdline

import (
	"math"
	"net/netip"
	"strings"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/notation"
	"github.com/lvskit/lvskit/names"
)

// Value parsing the way ipvsadm 1.31 does it with the C library: strtol for
// numbers, inet_aton then gethostbyname for IPv4 hosts, inet_pton for IPv6,
// getservbyname for port names.

// Limits ipvsadm applies to option values.
const (
	maxTimeout       = 31 * 24 * 60 * 60 // 2678400 s, ipvsadm's MAX_TIMEOUT
	defaultPersist   = 360               // -p without a value
	maxWeight        = math.MaxInt32     // Debian's ipvsadm; upstream says 65535
	maxSyncMaxLen    = 65535 - 20 - 8    // largest UDP payload of an IPv4 datagram
	schedNameMax     = 15                // IP_VS_SCHEDNAME_MAXLEN - 1
	peNameMax        = 16                // bytes ipvsadm copies for --pe
	ifNameMax        = 15                // IP_VS_IFNAME_MAXLEN - 1
	schedFlagsArgMax = 127               // ipvsadm keeps -b in a 128-byte buffer
	defaultScheduler = "wlc"
	defaultInterface = "eth0"
)

// isCSpace is C's isspace in the "C" locale.
func isCSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

func isCDigit(c byte) bool { return c >= '0' && c <= '9' }

// cStrtol is C's strtol(s, &end, 10) for a 64-bit long: it returns the
// value, how many bytes were consumed (0 when no digit was found) and
// whether the value overflowed (ERANGE; the value is then clamped).
func cStrtol(s string) (value int64, consumed int, overflow bool) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	negative := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		negative = s[i] == '-'
		i++
	}
	start := i
	var magnitude uint64
	for i < len(s) && isCDigit(s[i]) {
		d := uint64(s[i] - '0')
		if magnitude > (math.MaxUint64-d)/10 {
			overflow = true
		} else {
			magnitude = magnitude*10 + d
		}
		i++
	}
	if i == start {
		return 0, 0, false
	}
	switch {
	case negative && (overflow || magnitude > 1<<63):
		return math.MinInt64, i, true
	case !negative && (overflow || magnitude > math.MaxInt64):
		return math.MaxInt64, i, true
	case negative:
		return -int64(magnitude), i, false
	}
	return int64(magnitude), i, false
}

// stringToNumber is ipvsadm's string_to_number: the whole text must be a
// base-10 integer (leading blanks and a sign allowed) within [min, max].
func stringToNumber(s string, min, max int64) (int64, bool) {
	v, n, overflow := cStrtol(s)
	if n == 0 || n != len(s) || overflow || v < min || v > max {
		return 0, false
	}
	return v, true
}

// cAtoi is C's atoi: strtol's value truncated to a 32-bit int, trailing
// text ignored.
func cAtoi(s string) int32 {
	v, _, _ := cStrtol(s)
	return int32(v)
}

// parseFwmark is ipvsadm's parse_fwmark: 1..4294967295, whole text.
func parseFwmark(s string) (uint32, bool) {
	v, n, overflow := cStrtol(s)
	// ipvsadm stores strtol's result in an unsigned long, so negative
	// values become huge and fail the upper bound.
	if n == 0 || n != len(s) || overflow || v <= 0 || v > math.MaxUint32 {
		return 0, false
	}
	return uint32(v), true
}

// allDigits is ipvsadm's str_is_digit: true for text made only of decimal
// digits, including the empty text.
func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isCDigit(s[i]) {
			return false
		}
	}
	return true
}

// inetPton6 is inet_pton(AF_INET6): a plain IPv6 literal, no zone.
func inetPton6(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a, true
}

// inetPton4 is inet_pton(AF_INET): exactly four decimal parts without
// leading zeros.
func inetPton4(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, false
	}
	return a, true
}

// hostAddress is a parsed -t/-u/--sctp-service/-r argument.
type hostAddress struct {
	family  ipvs.Family
	addr    netip.Addr
	port    uint16
	hasPort bool
}

// parseHostAddress is ipvsadm's parse_service: "host[:port]" or
// "[ipv6]:port" or a bare IPv6 literal (which never has a port). proto is
// the service protocol known so far, used to look up port names.
func parseHostAddress(s string, proto ipvs.Protocol, r *names.Resolver) (hostAddress, bool) {
	var h hostAddress
	if allDigits(s) {
		return h, false
	}
	host := s
	var portText string
	hasPort := false
	if s[0] == '[' {
		inner := s[1:]
		end := strings.IndexByte(inner, ']')
		if end < 0 {
			return h, false
		}
		after := inner[end+1:]
		if after == "" || after[0] != ':' {
			return h, false
		}
		host, portText, hasPort = inner[:end], after[1:], true
	}
	if a, ok := inetPton6(host); ok {
		h.family, h.addr = ipvs.AFInet6, a
	} else {
		// Not IPv6: the port is whatever follows the last colon of the
		// host text, so "[1.2.3.4]:80" loses its port.
		portText, hasPort = "", false
		if i := strings.LastIndexByte(host, ':'); i >= 0 {
			host, portText, hasPort = host[:i], host[i+1:], true
		}
		a, ok := names.ParseInetAton(host)
		if !ok && r != nil {
			a, ok = r.LookupHost4(host)
		}
		if !ok {
			return h, false
		}
		h.family, h.addr = ipvs.AFInet, a
	}
	if hasPort {
		h.hasPort = true
		if n, ok := stringToNumber(portText, 0, 65535); ok {
			h.port = uint16(n)
		} else if p, ok := lookupPort(portText, proto, r); ok {
			h.port = p
		} else {
			return h, false
		}
	}
	return h, true
}

func lookupPort(name string, proto ipvs.Protocol, r *names.Resolver) (uint16, bool) {
	pn := notation.Protocol(proto).Services
	if pn == "" || r == nil {
		return 0, false
	}
	return r.ServicePort(name, pn)
}

// parseNetmask4 is ipvsadm's parse_netmask: inet_aton, else a host name;
// the result is the mask as a big-endian number.
func parseNetmask4(s string, r *names.Resolver) (uint32, bool) {
	a, ok := names.ParseInetAton(s)
	if !ok && r != nil {
		a, ok = r.LookupHost4(s)
	}
	if !ok {
		return 0, false
	}
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]), true
}

// schedFlagResult is the outcome of parsing a -b list.
type schedFlagResult struct {
	flags ipvs.ServiceFlags
	// failure is ipvsadm's message for a bad item, empty when fine.
	failure string
	// crash is set for a list made only of commas: ipvsadm passes strtok's
	// NULL to strcmp and dies with SIGSEGV.
	crash bool
}

// parseSchedFlags is ipvsadm's parse_sched_flags for the list arg and the
// scheduler name sched ("" means the default, wlc).
func parseSchedFlags(sched, arg string) schedFlagResult {
	if sched == "" {
		sched = defaultScheduler
	}
	items := strings.FieldsFunc(arg, func(r rune) bool { return r == ',' })
	if len(items) == 0 {
		return schedFlagResult{crash: true}
	}
	var flags ipvs.ServiceFlags
	for _, item := range items {
		need := ""
		switch item {
		case "flag-1":
			flags |= ipvs.FlagSched1
		case "flag-2":
			flags |= ipvs.FlagSched2
		case "flag-3":
			flags |= ipvs.FlagSched3
		case "sh-fallback":
			flags, need = flags|ipvs.FlagSched1, "sh"
		case "sh-port":
			flags, need = flags|ipvs.FlagSched2, "sh"
		case "mh-fallback":
			flags, need = flags|ipvs.FlagSched1, "mh"
		case "mh-port":
			flags, need = flags|ipvs.FlagSched2, "mh"
		default:
			return schedFlagResult{failure: "invalid scheduler flag `" + item + "'"}
		}
		if need != "" && sched != need {
			return schedFlagResult{failure: "incompatible scheduler flag `" + item + "'"}
		}
	}
	return schedFlagResult{flags: flags}
}

// parseTunType maps a --tun-type value to the kernel's tunnel type.
func parseTunType(s string) (ipvs.TunType, bool) {
	for i, name := range tunnelTypes {
		if s == name {
			return ipvs.TunType(i), true
		}
	}
	return 0, false
}

// parseMcastGroup checks a --mcast-group value: text with a colon must be an
// IPv6 multicast address, anything else an IPv4 multicast address. It
// returns ipvsadm's message on failure.
func parseMcastGroup(s string) (netip.Addr, string) {
	if strings.IndexByte(s, ':') >= 0 {
		a, ok := inetPton6(s)
		if !ok || a.As16()[0] != 0xff {
			return netip.Addr{}, "invalid IPv6 mcast-group `" + s + "'"
		}
		return a, ""
	}
	a, ok := inetPton4(s)
	if !ok || a.As4()[0]&0xf0 != 0xe0 {
		return netip.Addr{}, "invalid IPv4 mcast-group `" + s + "'"
	}
	return a, ""
}

// truncate cuts s to at most n bytes, as ipvsadm's fixed-size copies do.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
