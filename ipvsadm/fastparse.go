package ipvsadm

import (
	"net/netip"

	"github.com/lvskit/lvskit/ipvs"
)

// ParseFast parses the lines a restore is mostly made of, the ones
// ipvsadm -S -n writes ("-A -t 10.0.0.1:80 -s wlc", "-a -t 10.0.0.1:80 -r
// 192.168.1.2:80 -m -w 1"), without allocating for IPv4 (one small string
// per IPv6 address): fields are the line's tokens after the program name.
//
// It accepts only lines whose every word is unambiguous: -A or -a first,
// then separate words among -t, -u, -f, -s, -p, -M, -r, -w, -m, -g, -i, with
// numeric IPv4 addresses in canonical dotted decimal or bracketed IPv6
// literals of hexadecimal digits and colons with a port (-M only for
// IPv4 services), decimal numbers and lower-case scheduler names. For such a line it fills *inv exactly as
// Parse would (except Argv, left nil) and returns true; the matrix and
// semantic checks are Parse's own. Anything else, including every line
// Parse would refuse, returns false, and the caller uses Parse, which
// prints ipvsadm's message. A property test holds ParseFast to Parse.
func ParseFast(fields [][]byte, inv *Invocation) bool {
	if len(fields) == 0 || len(fields[0]) != 2 || fields[0][0] != '-' {
		return false
	}
	*inv = Invocation{}
	switch fields[0][1] {
	case 'A':
		inv.Command = CmdAddService
	case 'a':
		inv.Command = CmdAddServer
	default:
		return false
	}
	svc, dest := &inv.Service, &inv.Dest
	dest.Weight = 1
	dest.FwdMethod = ipvs.FwdRoute
	svc.Netmask = 0xffffffff

	for i := 1; i < len(fields); i++ {
		w := fields[i]
		if len(w) != 2 || w[0] != '-' {
			return false
		}
		letter := w[1]
		opt := fastOption(letter)
		if opt == NoOption || inv.Options.Has(opt) {
			return false
		}
		inv.Options.add(opt)
		// value is the next word, for the options that take one.
		var value []byte
		switch letter {
		case 't', 'u', 'f', 's', 'M', 'r', 'w':
			if i+1 >= len(fields) {
				return false
			}
			i++
			value = fields[i]
		case 'p':
			// An optional value: taken unless the next word looks like an
			// option.
			if i+1 < len(fields) && (len(fields[i+1]) == 0 || fields[i+1][0] != '-') {
				i++
				value = fields[i]
			}
		}
		switch letter {
		case 't', 'u':
			svc.Protocol = ipvs.ProtoTCP
			if letter == 'u' {
				svc.Protocol = ipvs.ProtoUDP
			}
			a, port, hasPort, ok := fastHostPort(value)
			if !ok {
				return false
			}
			svc.Family, svc.Addr = familyOf(a), a
			if svc.Family == ipvs.AFInet6 {
				svc.Netmask = 128
			}
			if hasPort {
				svc.Port = port
			}
		case 'f':
			mark, ok := fastDecimal(value, 1, 1<<32-1)
			if !ok {
				return false
			}
			svc.Family, svc.Protocol, svc.FWMark = ipvs.AFInet, ipvs.ProtoTCP, uint32(mark)
		case 's':
			name, ok := fastSchedulerName(value)
			if !ok {
				return false
			}
			svc.Scheduler = name
		case 'p':
			svc.Flags |= ipvs.FlagPersistent
			svc.Timeout = defaultPersist
			if value != nil {
				n, ok := fastDecimal(value, 1, maxTimeout)
				if !ok {
					return false
				}
				svc.Timeout = uint32(n)
			}
		case 'M':
			if svc.Family == ipvs.AFInet6 {
				return false // a prefix length: left to Parse
			}
			mask, ok := fastIPv4(value)
			if !ok {
				return false
			}
			b := mask.As4()
			svc.Netmask = uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		case 'r':
			a, port, hasPort, ok := fastHostPort(value)
			if !ok {
				return false
			}
			dest.Family, dest.Addr, dest.Port = familyOf(a), a, svc.Port
			if hasPort {
				dest.Port = port
			}
		case 'w':
			n, ok := fastDecimal(value, 0, maxWeight)
			if !ok {
				return false
			}
			dest.Weight = uint32(n)
		case 'm':
			dest.FwdMethod = ipvs.FwdMasq
		case 'g':
			dest.FwdMethod = ipvs.FwdRoute
		case 'i':
			dest.FwdMethod = ipvs.FwdTunnel
		}
	}
	return checkMatrix(inv.Command, inv.Options) == nil && inv.checkSemantics() == nil
}

// fastOption is the option bit of the letters ParseFast handles.
func fastOption(letter byte) Option {
	switch letter {
	case 't', 'u', 'f':
		return OptService
	case 's':
		return OptScheduler
	case 'p':
		return OptPersistent
	case 'M':
		return OptNetmask
	case 'r':
		return OptRealServer
	case 'w':
		return OptWeight
	case 'm', 'g', 'i':
		return OptForward
	}
	return NoOption
}

// fastSchedulerNames spares an allocation for the schedulers ipvsadm
// knows; other names are copied.
var fastSchedulerNames = [...]string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh"}

// fastSchedulerName accepts 1 to schedNameMax lower-case letters or
// digits: no truncation, and nothing popt would treat specially.
func fastSchedulerName(b []byte) (string, bool) {
	if len(b) == 0 || len(b) > schedNameMax {
		return "", false
	}
	for _, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return "", false
		}
	}
	for _, name := range fastSchedulerNames {
		if string(b) == name {
			return name, true
		}
	}
	return string(b), true
}

// fastDecimal accepts 1 to 10 decimal digits (no sign, no blanks) whose
// value lies in [min, max]; strtol reads them alike.
func fastDecimal(b []byte, min, max int64) (int64, bool) {
	if len(b) == 0 || len(b) > 10 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, v >= min && v <= max
}

// fastIPv4 accepts four decimal numbers 0-255 without leading zeros (which
// inet_aton would read as octal), separated by dots.
func fastIPv4(b []byte) (netip.Addr, bool) {
	a, n, ok := fastIPv4Prefix(b)
	return a, ok && n == len(b)
}

// fastIPv4Prefix reads an address as fastIPv4 accepts it at the start of
// b and returns how many bytes it took.
func fastIPv4Prefix(b []byte) (netip.Addr, int, bool) {
	var out [4]byte
	i := 0
	for part := range 4 {
		if part > 0 {
			if i >= len(b) || b[i] != '.' {
				return netip.Addr{}, 0, false
			}
			i++
		}
		start, v := i, 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' && i-start < 3 {
			v = v*10 + int(b[i]-'0')
			i++
		}
		if i == start || v > 255 || (b[start] == '0' && i-start > 1) {
			return netip.Addr{}, 0, false
		}
		out[part] = byte(v)
	}
	return netip.AddrFrom4(out), i, true
}

// fastHostPort accepts "a.b.c.d" or "a.b.c.d:port" with a decimal port,
// and "[ipv6]:port" (what -S -n writes for IPv6) where the brackets hold
// hexadecimal digits and colons only.
func fastHostPort(b []byte) (a netip.Addr, port uint16, hasPort, ok bool) {
	if len(b) > 0 && b[0] == '[' {
		return fastIPv6Port(b)
	}
	a, n, ok := fastIPv4Prefix(b)
	switch {
	case !ok:
		return a, 0, false, false
	case n == len(b):
		return a, 0, false, true
	case b[n] != ':':
		return a, 0, false, false
	}
	p, ok := fastDecimal(b[n+1:], 0, 65535)
	return a, uint16(p), true, ok
}

// fastIPv6Port accepts "[ipv6]:port": a literal of hexadecimal digits and
// colons (no embedded IPv4, no zone: Parse takes those), read as
// inet_pton reads it, and a decimal port.
func fastIPv6Port(b []byte) (a netip.Addr, port uint16, hasPort, ok bool) {
	end := 1
	for end < len(b) && end <= 40 && (b[end] == ':' || isHexDigit(b[end])) {
		end++
	}
	if end >= len(b) || b[end] != ']' || end+1 >= len(b) || b[end+1] != ':' {
		return a, 0, false, false
	}
	a, ok = inetPton6(string(b[1:end]))
	if !ok {
		return a, 0, false, false
	}
	p, ok := fastDecimal(b[end+2:], 0, 65535)
	return a, uint16(p), true, ok
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// familyOf is the address family of an address ParseFast read.
func familyOf(a netip.Addr) ipvs.Family {
	if a.Is6() {
		return ipvs.AFInet6
	}
	return ipvs.AFInet
}

// ServerTemplate parses the destination lines of a saved service without
// splitting them into words: such lines differ from one another only in
// the value of -r ("-a -t 10.0.0.1:80 -r 192.168.1.2:80 -m -w 1", then
// 192.168.1.3:80, ...). Set makes a line ParseFast accepted the template;
// Match then parses each line that equals it but for that value into the
// invocation ParseFast would make of it (a property test holds it to
// that). A reader of a large rules file spares most of its per-line work.
type ServerTemplate struct {
	line       []byte // the template line, without its newline (a copy)
	start, end int    // where its -r value lies in line
	// inv is the template's invocation; Match changes its destination's
	// family, address and port to the matched line's.
	inv Invocation
	// family is the template's destination family; portOfService says
	// the destination takes the service's port (direct routing and
	// tunnelling, as checkSemantics decides).
	family        ipvs.Family
	portOfService bool
	ok            bool
}

// Set makes line, whose words fields are (sub-slices of line, as a
// splitter cuts them) and which ParseFast read into inv, the template. A
// line other than a destination's clears it.
func (t *ServerTemplate) Set(line []byte, fields [][]byte, inv *Invocation) {
	t.ok = false
	if inv.Command != CmdAddServer {
		return
	}
	for k := 1; k+1 < len(fields); k++ {
		if string(fields[k]) != "-r" {
			continue
		}
		v := fields[k+1]
		// Where v lies in line: found by address, so that a word copied
		// elsewhere is never mistaken for part of line.
		start := -1
		for i := 1; len(v) > 0 && i+len(v) <= len(line); i++ {
			if &line[i] == &v[0] {
				start = i
				break
			}
		}
		// A word the splitter cut from a longer run (restore cuts runs of
		// 4,096 bytes) is not one: a blank must come before it.
		if start < 0 || !isBlank(line[start-1]) {
			return
		}
		t.line = append(t.line[:0], line...)
		t.start, t.end, t.inv, t.ok = start, start+len(v), *inv, true
		t.family = inv.Dest.Family
		m := inv.Dest.FwdMethod
		t.portOfService = inv.Service.FWMark == 0 && (m == ipvs.FwdTunnel || m == ipvs.FwdRoute)
		return
	}
}

// Ready reports whether a template is set: without one, Match matches
// nothing, and a reader need not offer it the input.
func (t *ServerTemplate) Ready() bool { return t.ok }

// Match parses the line at the start of buf when it ends with a newline
// within buf and equals the template but for the value of -r: it returns
// the line's length (without the newline) and the invocation ParseFast
// would make of it, valid until the next Match or Set. Otherwise it
// returns false and the caller reads the line its own way.
//
// Why the words are right without splitting: the template's -r value is
// one word, so blanks (or the line's end) surround it; the bytes before
// and after it are the template's; and the new value holds only bytes of
// an address and port, none of them a blank, NUL or non-ASCII byte for
// any of the readers (restore's or lvsctl's). So the line's words are
// the template's with that one replaced. ParseFast reads the words of a
// destination line independently but for the port, and its semantic check
// (checkSemantics) depends on the value only through the destination's
// family: a value of the template's family with a port passes it as the
// template did, and takes the service's port where the template did.
func (t *ServerTemplate) Match(buf []byte) (int, *Invocation, bool) {
	if !t.ok || len(buf) <= t.start || string(buf[:t.start]) != string(t.line[:t.start]) {
		return 0, nil, false
	}
	// The value: an IPv4 address and port read where it starts (the
	// bytes after them must be the template's, which start with a
	// blank), or a bracketed IPv6 address and port up to the first byte
	// no address holds. A value without a port is left to ParseFast: it
	// takes the service's port as far as the words before -r named it.
	i, ok := t.start, false
	var a netip.Addr
	var port uint16
	if v := buf[t.start:]; len(v) > 0 && v[0] == '[' {
		for i < len(buf) && hostPortByte[buf[i]] {
			i++
		}
		a, port, _, ok = fastIPv6Port(buf[t.start:i])
	} else {
		a, port, i, ok = fastIPv4PortPrefix(v)
		i += t.start
	}
	tail := t.line[t.end:]
	end := i + len(tail)
	if !ok || familyOf(a) != t.family || end >= len(buf) || buf[end] != '\n' || string(buf[i:end]) != string(tail) {
		return 0, nil, false
	}
	if t.portOfService {
		port = t.inv.Service.Port
	}
	t.inv.Dest.Family, t.inv.Dest.Addr, t.inv.Dest.Port = t.family, a, port
	return end, &t.inv, true
}

// fastIPv4PortPrefix reads "a.b.c.d:port" as fastHostPort does at the start
// of b and returns how many bytes it took.
func fastIPv4PortPrefix(b []byte) (netip.Addr, uint16, int, bool) {
	a, n, ok := fastIPv4Prefix(b)
	if !ok || n >= len(b) || b[n] != ':' {
		return a, 0, 0, false
	}
	end := n + 1
	for end < len(b) && b[end] >= '0' && b[end] <= '9' {
		end++
	}
	p, ok := fastDecimal(b[n+1:end], 0, 65535)
	return a, uint16(p), end, ok
}

// isBlank reports whether c separates words for lvsctl's reader (restore's
// separators are among them).
func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' }

// hostPortByte holds the bytes of fastIPv6Port's grammar.
var hostPortByte = func() (t [256]bool) {
	for _, c := range []byte("0123456789abcdefABCDEF:[]") {
		t[c] = true
	}
	return t
}()
