package list

import (
	"net/netip"
	"strconv"
	"sync"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/notation"
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
	raw := notation.Addr16(addr)
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
		b = notation.AppendAddr(b, family, raw)
	}
	if bracket {
		b = append(b, ']')
	}
	b = append(b, ':')
	portNamed := false
	if !o.Numeric {
		if p := notation.Protocol(proto).Services; p != "" {
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

// appendTunInfo appends the --tun-info column text: n/a for non-tunnel
// destinations and unknown tunnel types, else ipip, gue:<port>:<csum> or
// gre:<csum> (cut to 15 characters like ipvsadm's 16-byte buffer).
func appendTunInfo(b []byte, d *ipvs.Destination) []byte {
	name, ok := notation.TunTypeName(d.TunType)
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
		b = append(b, notation.TunCsum(d.TunFlags).Info...)
	case ipvs.TunGRE:
		b = append(b, ':')
		b = append(b, notation.TunCsum(d.TunFlags).Info...)
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
