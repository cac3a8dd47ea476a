package list

import (
	"bufio"
	"errors"
	"io"
	"net/netip"
	"os"
	"strconv"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/notation"
)

// ErrSilent is returned when ipvsadm would exit with status 1 without a
// message: Connections met a line that holds nothing but white space (the
// real binary's sscanf returns EOF and it calls exit(1)). What was listed
// before has been written.
var ErrSilent = errors.New("ipvsadm exits with status 1 and no message")

// connLineMax is the size of ipvsadm's fgets buffer minus its terminating
// NUL: longer lines are read, and parsed, in pieces of this size.
const connLineMax = 255

// Connections writes the -L -c listing from the kernel's connection table
// file (normally /proc/net/ip_vs_conn), in file order, skipping its first
// line. With persistConn the title has the pe columns and lines carrying a
// persistence engine show its name and data. Names follow o.Numeric; the
// format and sort options do not apply.
//
// A file that cannot be opened gives the error "cannot open file <path>", an
// empty one "unexpected input from <path>"; both mean exit status 1 with that
// message.
func Connections(w io.Writer, path string, persistConn bool, o Options) error {
	f, err := os.Open(path)
	if err != nil {
		return errors.New("cannot open file " + path)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	chunk := make([]byte, 0, connLineMax)
	if chunk, err = readChunk(r, chunk); err != nil {
		return errors.New("unexpected input from " + path)
	}
	p := newPrinter(w, &o)
	p.w.WriteString("IPVS connection entries\n")
	if persistConn {
		p.w.WriteString("pro expire state       source             virtual            destination        pe name          pe_data\n")
	} else {
		p.w.WriteString("pro expire state       source             virtual            destination\n")
	}
	var c connFields
	for {
		chunk, err = readChunk(r, chunk)
		if err == io.EOF {
			break
		}
		if err != nil {
			return p.fail(err)
		}
		if !c.scan(string(chunk)) {
			return p.fail(ErrSilent)
		}
		p.connection(&c, persistConn)
	}
	return p.w.Flush()
}

// readChunk reads like C's fgets with a 256-byte buffer: up to and
// including the next newline, but at most 255 bytes. It returns io.EOF only
// when nothing was read.
func readChunk(r *bufio.Reader, buf []byte) ([]byte, error) {
	buf = buf[:0]
	for len(buf) < connLineMax {
		c, err := r.ReadByte()
		if err != nil {
			if len(buf) > 0 && err == io.EOF {
				return buf, nil
			}
			return buf, err
		}
		buf = append(buf, c)
		if c == '\n' {
			break
		}
	}
	return buf, nil
}

// connFields are the fields ipvsadm scans from one connection line. Like
// the C variables they replace, fields a short line does not reach keep the
// values of the previous line (they live in the same stack slots each time).
type connFields struct {
	n                                      int // fields converted
	protocol, client, virtual, dest, state string
	peName, peData                         string
	cport, vport, dport                    uint16
	expires                                uint32
	caddr, vaddr, daddr                    [16]byte
	family, destFamily                     ipvs.Family
}

// scan parses a line the way ipvsadm's sscanf("%s %s %hX %s %hX %s %hX %s
// %d %s %s") does, then the addresses. It returns false when the line has
// no field at all.
func (c *connFields) scan(line string) bool {
	s := cScanner{s: line}
	n := 0
	step := func(ok bool) bool {
		if ok {
			n++
		}
		return ok
	}
	if !s.atEOF() {
		_ = step(s.str(&c.protocol)) &&
			step(s.str(&c.client)) && step(s.hex16(&c.cport)) &&
			step(s.str(&c.virtual)) && step(s.hex16(&c.vport)) &&
			step(s.str(&c.dest)) && step(s.hex16(&c.dport)) &&
			step(s.str(&c.state)) && step(s.dec(&c.expires)) &&
			step(s.str(&c.peName)) && step(s.str(&c.peData))
	}
	if n == 0 {
		return false
	}
	c.n = n
	c.family, c.destFamily = ipvs.AFInet, ipvs.AFInet
	if a, ok := parseInet6(c.client); ok {
		c.caddr = a
		if v, ok := parseInet6(c.virtual); ok {
			c.vaddr = v
		}
		c.family = ipvs.AFInet6
	} else if a, ok := parseInet4(c.client); ok {
		c.caddr = a
		if v, ok := parseInet4(c.virtual); ok {
			c.vaddr = v
		}
	} else {
		c.caddr = hexAddr(c.client)
		c.vaddr = hexAddr(c.virtual)
	}
	if a, ok := parseInet6(c.dest); ok {
		c.daddr = a
		c.destFamily = ipvs.AFInet6
	} else if a, ok := parseInet4(c.dest); ok {
		c.daddr = a
	} else {
		c.daddr = hexAddr(c.dest)
	}
	return true
}

// parseInet6 is inet_pton(AF_INET6).
func parseInet6(s string) ([16]byte, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Zone() != "" {
		return [16]byte{}, false
	}
	return a.As16(), true
}

// parseInet4 is inet_pton(AF_INET): a strict dotted quad.
func parseInet4(s string) ([16]byte, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return [16]byte{}, false
	}
	return notation.Addr16(a), true
}

// hexAddr reads the kernel's %08X address form with strtoul(s, NULL, 16)
// semantics (sign, optional 0x, stops at the first non-hex character, 0 when
// there are no digits, ULONG_MAX on overflow) and keeps the low 32 bits.
func hexAddr(s string) [16]byte {
	v := cStrtoul(s, 16)
	return [16]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

// cStrtoul is C's strtoul for the bases used here (10 and 16), on a string
// without leading white space.
func cStrtoul(s string, base uint64) uint64 {
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if base == 16 && len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && digitValue(s[2]) < 16 {
		s = s[2:]
	}
	var v uint64
	overflow := false
	for i := 0; i < len(s); i++ {
		d := digitValue(s[i])
		if d >= base {
			break
		}
		if v > (^uint64(0)-d)/base {
			overflow = true
		}
		v = v*base + d
	}
	if overflow {
		return ^uint64(0)
	}
	if neg {
		return -v
	}
	return v
}

func digitValue(c byte) uint64 {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0')
	case c >= 'a' && c <= 'z':
		return uint64(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return uint64(c-'A') + 10
	}
	return 99
}

// cScanner walks a string like sscanf's directives.
type cScanner struct {
	s string
	i int
}

func isCSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

func (s *cScanner) skipSpace() {
	for s.i < len(s.s) && isCSpace(s.s[s.i]) {
		s.i++
	}
}

// atEOF reports whether only white space is left.
func (s *cScanner) atEOF() bool {
	s.skipSpace()
	return s.i >= len(s.s)
}

// str is %s: a run of non-space characters.
func (s *cScanner) str(dst *string) bool {
	s.skipSpace()
	start := s.i
	for s.i < len(s.s) && !isCSpace(s.s[s.i]) {
		s.i++
	}
	if s.i == start {
		return false
	}
	*dst = s.s[start:s.i]
	return true
}

// number scans an optionally signed integer in base (with an optional 0x
// prefix for base 16) and returns its text, or false when no digit follows.
func (s *cScanner) number(base uint64) (string, bool) {
	s.skipSpace()
	start := s.i
	j := s.i
	if j < len(s.s) && (s.s[j] == '+' || s.s[j] == '-') {
		j++
	}
	if base == 16 && j+2 < len(s.s) && s.s[j] == '0' && (s.s[j+1] == 'x' || s.s[j+1] == 'X') && digitValue(s.s[j+2]) < 16 {
		j += 2
	}
	digits := j
	for j < len(s.s) && digitValue(s.s[j]) < base {
		j++
	}
	if j == digits {
		return "", false
	}
	s.i = j
	return s.s[start:j], true
}

// hex16 is %hX.
func (s *cScanner) hex16(dst *uint16) bool {
	t, ok := s.number(16)
	if ok {
		*dst = uint16(cStrtoul(t, 16))
	}
	return ok
}

// dec is %d stored into an unsigned int.
func (s *cScanner) dec(dst *uint32) bool {
	t, ok := s.number(10)
	if ok {
		v, err := strconv.ParseInt(t, 10, 64)
		if err != nil { // out of range: strtol saturates
			v = -1 << 63
			if t[0] != '-' {
				v = 1<<63 - 1
			}
		}
		*dst = uint32(v)
	}
	return ok
}

// connection writes one line of the connection listing.
func (p *printer) connection(c *connFields, persistConn bool) {
	o := p.o
	proto, _ := notation.ProtocolNamed(c.protocol) // 0, named by no one, when unknown
	b := p.line[:0]
	b = appendPadded(b, c.protocol, 3)
	b = append(b, ' ')
	start := len(b)
	minutes, seconds := c.expires/60, c.expires%60
	b = appendZero2(b, int64(int32(minutes)))
	b = append(b, ':')
	b = appendZero2(b, int64(seconds))
	b = padTo(b, start, 6)
	b = append(b, ' ')
	b = appendPadded(b, c.state, 11)
	b = append(b, ' ')
	start = len(b)
	b = AppendAddrPort(b, c.family, addrFrom(c.family, c.caddr), c.cport, proto, o)
	b = padTo(b, start, 18)
	b = append(b, ' ')
	start = len(b)
	b = AppendAddrPort(b, c.family, addrFrom(c.family, c.vaddr), c.vport, proto, o)
	b = padTo(b, start, 18)
	b = append(b, ' ')
	if persistConn && c.n == 11 {
		start = len(b)
		b = AppendAddrPort(b, c.destFamily, addrFrom(c.destFamily, c.daddr), c.dport, proto, o)
		b = padTo(b, start, 16)
		b = append(b, ' ')
		b = appendPadded(b, c.peName, 18)
		b = append(b, ' ')
		b = append(b, c.peData...)
	} else {
		b = AppendAddrPort(b, c.destFamily, addrFrom(c.destFamily, c.daddr), c.dport, proto, o)
	}
	b = append(b, '\n')
	p.emit(b)
}

// addrFrom turns the kernel's 16-byte address form back into an address.
func addrFrom(family ipvs.Family, raw [16]byte) netip.Addr {
	if family == ipvs.AFInet {
		return netip.AddrFrom4([4]byte(raw[:4]))
	}
	return netip.AddrFrom16(raw)
}

// appendZero2 is %02d for the non-negative values it is used with.
func appendZero2(b []byte, v int64) []byte {
	if v < 10 {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, v, 10)
}
