package cmdline

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
	a, ok = hexIPv6(b[1:end])
	if !ok {
		return a, 0, false, false
	}
	p, ok := fastDecimal(b[end+2:], 0, 65535)
	return a, uint16(p), true, ok
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// hexIPv6 reads an IPv6 literal made of hexadecimal digits and colons as
// inetPton6 reads it (eight groups of one to four digits, or fewer with
// one "::" standing for at least one zero group), without the string
// inetPton6 needs: a restore of IPv6 services parses two such literals a
// line. TestHexIPv6MatchesInetPton6 holds the two to each other.
func hexIPv6(b []byte) (netip.Addr, bool) {
	var ip [16]byte
	n := 0         // bytes of ip written
	ellipsis := -1 // where "::" stands, in bytes of ip
	if len(b) >= 2 && b[0] == ':' && b[1] == ':' {
		ellipsis, b = 0, b[2:]
	}
	for len(b) > 0 {
		if n == 16 {
			return netip.Addr{}, false // a ninth group
		}
		v, digits := 0, 0
		for digits < len(b) && digits <= 4 && isHexDigit(b[digits]) {
			v = v<<4 | hexDigit(b[digits])
			digits++
		}
		if digits == 0 || digits > 4 {
			return netip.Addr{}, false
		}
		ip[n], ip[n+1] = byte(v>>8), byte(v)
		n += 2
		b = b[digits:]
		if len(b) == 0 {
			break
		}
		if b[0] != ':' || len(b) == 1 {
			return netip.Addr{}, false // not a separator, or a colon at the end
		}
		b = b[1:]
		if b[0] == ':' {
			if ellipsis >= 0 {
				return netip.Addr{}, false // a second "::"
			}
			ellipsis, b = n, b[1:]
		}
	}
	switch {
	case ellipsis < 0 && n < 16:
		return netip.Addr{}, false // too few groups
	case ellipsis >= 0 && n == 16:
		return netip.Addr{}, false // "::" standing for nothing
	case ellipsis >= 0:
		gap := 16 - n
		copy(ip[ellipsis+gap:], ip[ellipsis:n])
		clear(ip[ellipsis : ellipsis+gap])
	}
	return netip.AddrFrom16(ip), true
}

// hexDigit is the value of a hexadecimal digit.
func hexDigit(c byte) int {
	switch {
	case c <= '9':
		return int(c - '0')
	case c >= 'a':
		return int(c - 'a' + 10)
	default:
		return int(c - 'A' + 10)
	}
}

// familyOf is the address family of an address ParseFast read.
func familyOf(a netip.Addr) ipvs.Family {
	if a.Is6() {
		return ipvs.AFInet6
	}
	return ipvs.AFInet
}

// LineTemplate parses the lines of a saved rules file without splitting
// them into words: the lines of one kind differ from one another only in
// their addresses. A service's destination lines differ in the value of -r
// ("-a -t 10.0.0.1:80 -r 192.168.1.2:80 -m -w 1", then 192.168.1.3:80,
// ...), the next service's in the value of -t, -u or -f as well, and
// the services' own lines in that value ("-A -t 10.0.0.1:80 -s wlc", then
// 10.0.0.2:80; "-A -f 1 -s wlc", then 2). Set makes a line ParseFast
// accepted the template; Match then parses each line that equals it but
// for those values into the invocation ParseFast would make of it (a
// property test holds it to that). A reader of a large rules file spares most of its per-line work;
// it keeps one template for service lines and one for destination lines.
type LineTemplate struct {
	line []byte // the template line, without its newline (a copy)
	// spare is the buffer the line is rebuilt in when a new service's
	// value is longer or shorter than the last.
	spare []byte
	// slots are where its values lie in line, in line order.
	slots [2]slot
	n     int
	// inv is the template's invocation; Match changes its service's
	// address and port, and its destination's family, address and port,
	// to the matched line's.
	inv Invocation
	// svcFamily and svcPortZero are what the service's value must keep:
	// ParseFast's checks depend on that value only through its family
	// (netmask, the destination's family) and whether its port is zero
	// (a non-persistent service needs a port). family is the
	// destination's family; portOfService says the destination takes the
	// service's port (direct routing and tunnelling, as checkSemantics
	// decides).
	svcFamily     ipvs.Family
	svcPortZero   bool
	family        ipvs.Family
	portOfService bool
	ok            bool
}

// TemplateWindow is how much input a reader offers LineTemplate.Match
// at least: more than any destination line ipvsadm -S writes.
const TemplateWindow = 512

// slot is where one value lies in a template line.
type slot struct {
	start, end int
	server     bool // the value of -r; otherwise the service's (-t, -u, -f)
	mark       bool // the value of -f
}

// Set makes line, whose words fields are (sub-slices of line, as a
// splitter cuts them) and which ParseFast read into inv, the template of
// the lines of its kind (-A or -a): it holds the place of the service's
// -t, -u or -f value, and of a destination line's -r value. A line with
// neither, or one whose values cannot be placed, clears it.
func (t *LineTemplate) Set(line []byte, fields [][]byte, inv *Invocation) {
	t.ok, t.n = false, 0
	if inv.Command != CmdAddService && inv.Command != CmdAddServer {
		return
	}
	// A word equal to -t, -u, -f or -r in a line ParseFast read is that
	// option (no value ParseFast accepts looks like one), and the word
	// after it its value.
	for k := 1; k+1 < len(fields); k++ {
		server, mark := string(fields[k]) == "-r", string(fields[k]) == "-f"
		if !server && !mark && string(fields[k]) != "-t" && string(fields[k]) != "-u" {
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
		if t.n == len(t.slots) {
			return // ParseFast takes one service and one -r value
		}
		t.slots[t.n] = slot{start: start, end: start + len(v), server: server, mark: mark}
		t.n++
		k++
	}
	if t.n == 0 || t.n == 1 && inv.Command == CmdAddServer && !t.slots[0].server {
		return // a destination line's -r value always has a place
	}
	t.line = append(t.line[:0], line...)
	t.inv, t.ok = *inv, true
	t.svcFamily, t.svcPortZero = inv.Service.Family, inv.Service.Port == 0
	t.family = inv.Dest.Family
	m := inv.Dest.FwdMethod
	t.portOfService = inv.Command == CmdAddServer && inv.Service.FWMark == 0 && (m == ipvs.FwdTunnel || m == ipvs.FwdRoute)
}

// Invocation is the invocation of the template's line, or of the last
// line Match took.
func (t *LineTemplate) Invocation() *Invocation { return &t.inv }

// Ready reports whether a template is set: without one, Match matches
// nothing, and a reader need not offer it the input.
func (t *LineTemplate) Ready() bool { return t.ok }

// Match parses the line at the start of buf when it ends with a newline
// within buf and equals the template but for the values in its slots: it
// returns the line's length (without the newline), the invocation
// ParseFast would make of it (valid until the next Match or Set), and
// whether its service's value differed from the template's (the template
// then takes the new one, so the lines after it compare it as bytes).
// Otherwise it returns false and the caller reads the line its own way.
//
// Why the words are right without splitting: each slot holds one word, so
// blanks (or the line's end) surround it; the bytes around the slots are
// the template's; and a new value holds only bytes of an address and
// port, or decimal digits (a mark), none of them a blank, NUL or
// non-ASCII byte for any of the readers (restore's or lvsctl's). So the
// line's words are the template's with the values replaced. ParseFast
// reads the words of these lines independently but for the ports, and
// its semantic check (checkSemantics) depends on the values only through
// their families and whether the service's port is zero: values that keep
// those, with ports, pass it as the template did, and a destination takes
// the service's port where the template's did. (An fwmark service is IPv4
// without a port whatever its mark, and Match reads a mark with
// ParseFast's fastDecimal.)
func (t *LineTemplate) Match(buf []byte) (n int, inv *Invocation, newService, ok bool) {
	if !t.ok {
		return 0, nil, false, false
	}
	var (
		i, j          int // where the next fixed bytes start, in buf and in t.line
		svcAt, svcEnd int // the new service value in buf (svcEnd 0: none)
		svc, dest     netip.Addr
		svcPort, port uint16
		mark          uint32
	)
	k := 0
	if last := t.slots[t.n-1]; (t.n == 1 || last.server) && len(buf) > last.start && string(buf[:last.start]) == string(t.line[:last.start]) {
		// Most lines are the template's up to its last value, the -r
		// one (the lines of one service): one comparison takes them
		// there. (Before a service's value, a -r value must be read.)
		k, i, j = t.n-1, last.start, last.start
	}
	for ; k < t.n; k++ {
		s := t.slots[k]
		fixed := t.line[j:s.start]
		if len(buf)-i <= len(fixed) || string(buf[i:i+len(fixed)]) != string(fixed) {
			return 0, nil, false, false
		}
		i += len(fixed)
		j = s.end
		if old := t.line[s.start:s.end]; !s.server && len(buf)-i > len(old) && string(buf[i:i+len(old)]) == string(old) {
			i += len(old) // the same service: compared, not parsed (the fixed bytes next end its word)
			continue
		}
		if s.mark {
			end := i
			for end < len(buf) && buf[end] >= '0' && buf[end] <= '9' {
				end++
			}
			m, ok := fastDecimal(buf[i:end], 1, 1<<32-1)
			if !ok {
				return 0, nil, false, false
			}
			mark, svcAt, svcEnd = uint32(m), i, end
			i = end
			continue
		}
		a, p, end, ok := hostPortPrefix(buf[i:])
		if !ok {
			return 0, nil, false, false
		}
		if s.server {
			if familyOf(a) != t.family {
				return 0, nil, false, false
			}
			dest, port = a, p
		} else {
			if familyOf(a) != t.svcFamily || (p == 0) != t.svcPortZero {
				return 0, nil, false, false
			}
			svc, svcPort, svcAt, svcEnd = a, p, i, i+end
		}
		i += end
	}
	tail := t.line[j:]
	end := i + len(tail)
	if end >= len(buf) || buf[end] != '\n' || string(buf[i:end]) != string(tail) {
		return 0, nil, false, false
	}
	if svcEnd > 0 {
		if mark != 0 {
			t.inv.Service.FWMark = mark
		} else {
			t.inv.Service.Addr, t.inv.Service.Port = svc, svcPort
		}
		t.replaceService(buf[svcAt:svcEnd])
	}
	if t.inv.Command == CmdAddServer {
		if t.portOfService {
			port = t.inv.Service.Port
		}
		t.inv.Dest.Family, t.inv.Dest.Addr, t.inv.Dest.Port = t.family, dest, port
	}
	return end, &t.inv, svcEnd > 0, true
}

// replaceService puts value in the template line's service slot, moving
// what follows it.
func (t *LineTemplate) replaceService(value []byte) {
	for k := 0; k < t.n; k++ {
		s := &t.slots[k]
		if s.server {
			continue
		}
		shift := len(value) - (s.end - s.start)
		if shift == 0 {
			copy(t.line[s.start:], value)
			return
		}
		t.spare = append(append(append(t.spare[:0], t.line[:s.start]...), value...), t.line[s.end:]...)
		t.line, t.spare = t.spare, t.line
		s.end += shift
		for l := k + 1; l < t.n; l++ {
			t.slots[l].start += shift
			t.slots[l].end += shift
		}
		return
	}
}

// hostPortPrefix reads, at the start of b, an IPv4 address and port as
// fastHostPort does, or a bracketed IPv6 address and port up to the first
// byte no address holds, and returns how many bytes it took. A value
// without a port is refused: ParseFast gives it the service's port as
// far as the words before it named one.
func hostPortPrefix(b []byte) (netip.Addr, uint16, int, bool) {
	if len(b) > 0 && b[0] == '[' {
		i := 0
		for i < len(b) && hostPortByte[b[i]] {
			i++
		}
		a, port, _, ok := fastIPv6Port(b[:i])
		return a, port, i, ok
	}
	return fastIPv4PortPrefix(b)
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
