package names

import "net/netip"

// ParseInetAton parses s the way glibc's inet_aton does, which is how
// ipvsadm reads IPv4 host parts before falling back to a name lookup.
//
// The text has one to four parts separated by dots; each part starts with a
// digit and is read like C's strtoul with base 0 (0x/0X prefix: hex, leading
// 0: octal, otherwise decimal). Every part but the last must fit in a byte;
// the last fills the remaining bytes (a: 32 bits, a.b: 24, a.b.c: 16,
// a.b.c.d: 8). Like glibc, parsing stops at the first whitespace character:
// "10.0.0.1 junk" is 10.0.0.1, while any other trailing character makes the
// whole text invalid.
func ParseInetAton(s string) (netip.Addr, bool) {
	var bytes [4]byte
	parts := 0
	i := 0
	for {
		if i >= len(s) || !isDigit(s[i]) {
			return netip.Addr{}, false
		}
		val, n, ok := parseCUlong(s[i:])
		if !ok || val > 0xffffffff {
			return netip.Addr{}, false
		}
		i += n
		if i < len(s) && s[i] == '.' {
			if parts > 2 || val > 0xff {
				return netip.Addr{}, false
			}
			bytes[parts] = byte(val)
			parts++
			i++
			continue
		}
		if i < len(s) && !isCSpace(s[i]) {
			return netip.Addr{}, false
		}
		limits := [4]uint64{0xffffffff, 0xffffff, 0xffff, 0xff}
		if val > limits[parts] {
			return netip.Addr{}, false
		}
		word := uint32(bytes[0])<<24 | uint32(bytes[1])<<16 | uint32(bytes[2])<<8 | uint32(val)
		return netip.AddrFrom4([4]byte{byte(word >> 24), byte(word >> 16), byte(word >> 8), byte(word)}), true
	}
}

// parseCUlong reads an unsigned number at the start of s, which begins with a
// digit, using strtoul's base-0 rules. It returns the value, the number of
// bytes consumed and false on overflow of 64 bits (strtoul's ERANGE).
func parseCUlong(s string) (val uint64, n int, ok bool) {
	base := uint64(10)
	switch {
	case len(s) >= 3 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && hexValue(s[2]) >= 0:
		base, n = 16, 2
	case s[0] == '0':
		base = 8
	}
	overflow := false
	for ; n < len(s); n++ {
		d := hexValue(s[n])
		if d < 0 || uint64(d) >= base {
			break
		}
		if val > (^uint64(0)-uint64(d))/base {
			overflow = true
		}
		val = val*base + uint64(d)
	}
	return val, n, !overflow
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isCSpace is C's isspace in the "C" locale.
func isCSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

func hexValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
