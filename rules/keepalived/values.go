package keepalived

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// maxRange bounds the addresses one group entry expands to.
const maxRange = 1 << 16

// addrRange reads "A", "A-N", "A-B" or "A/LEN" (check_data.c
// alloc_vsg_entry): N replaces the last byte of an IPv4 or the last group
// of an IPv6 address.
func addrRange(w string) ([]netip.Addr, error) {
	if pfx, err := netip.ParsePrefix(w); err == nil {
		if pfx.Addr().BitLen()-pfx.Bits() > 16 {
			return nil, fmt.Errorf("%q: more than %d addresses", w, maxRange)
		}
		var out []netip.Addr
		for a := pfx.Masked().Addr(); pfx.Contains(a); a = a.Next() {
			out = append(out, a.Unmap())
		}
		return out, nil
	}
	base, last, isRange := strings.Cut(w, "-")
	a, err := netip.ParseAddr(base)
	if err != nil {
		return nil, fmt.Errorf("%q: not an IP address or range", w)
	}
	a = a.Unmap()
	if !isRange {
		return []netip.Addr{a}, nil
	}
	end, err := netip.ParseAddr(last)
	if err != nil || end.Is4() != a.Is4() {
		b := a.AsSlice()
		var hi uint64
		if a.Is4() {
			hi, err = strconv.ParseUint(last, 10, 8)
			b[3] = byte(hi)
		} else {
			hi, err = strconv.ParseUint(last, 16, 16)
			b[14], b[15] = byte(hi>>8), byte(hi)
		}
		if err != nil {
			return nil, fmt.Errorf("%q: not an IP address or range", w)
		}
		end, _ = netip.AddrFromSlice(b)
	}
	end = end.Unmap()
	if end.Less(a) {
		return nil, fmt.Errorf("%q: the range's end must be at least its start", w)
	}
	var out []netip.Addr
	for x := a; ; x = x.Next() {
		if len(out) == maxRange {
			return nil, fmt.Errorf("%q: more than %d addresses", w, maxRange)
		}
		out = append(out, x)
		if x == end {
			return out, nil
		}
	}
}

// splitCommand splits misc_path into arguments at blanks; single or
// double quotes keep blanks in an argument, as keepalived's script
// parameters do.
func splitCommand(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0 && ch == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(ch)
		case ch == '\'' || ch == '"':
			quote, in = ch, true
		case ch == ' ' || ch == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if in {
		out = append(out, cur.String())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty")
	}
	return out, nil
}

// hexString reads keepalived's free-form HEX_STR: each word is read two
// digits to a byte, and a last digit alone is a byte of its own
// ("Ab12f 3" is AB 12 0F 03). X stands for any digit.
func hexString(words []string) (string, bool) {
	var out strings.Builder
	for _, w := range words {
		for i := 0; i < len(w); i += 2 {
			pair := w[i:min(i+2, len(w))]
			if len(pair) == 1 {
				pair = "0" + pair
			}
			for _, ch := range pair {
				if !strings.ContainsRune("0123456789abcdefABCDEFxX", ch) {
					return "", false
				}
			}
			out.WriteString(pair)
		}
	}
	if out.Len() == 0 {
		return "", false
	}
	return strings.ToLower(out.String()), true
}
