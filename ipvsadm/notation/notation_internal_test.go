package notation

import (
	"net/netip"
	"strconv"
	"testing"
)

// TestInet6Ntop checks the glibc inet_ntop forms, including the ones where
// Go's netip formatting differs (IPv4-compatible addresses).
func TestInet6Ntop(t *testing.T) {
	for in, want := range map[string]string{
		"::":                                     "::",
		"::1":                                    "::1",
		"::2":                                    "::2",
		"1::":                                    "1::",
		"2001:db8:0:0:1:0:0:1":                   "2001:db8::1:0:0:1",
		"2001:db8:0:1:1:1:1:1":                   "2001:db8:0:1:1:1:1:1",
		"::ffff:1.2.3.4":                         "::ffff:1.2.3.4",
		"::1.2.3.4":                              "::1.2.3.4",
		"::ffff:0:1.2.3.4":                       "::ffff:0:102:304",
		"64:ff9b::1.2.3.4":                       "64:ff9b::102:304",
		"2001:db8::a0":                           "2001:db8::a0",
		"fe80::1:0:0:0":                          "fe80::1:0:0:0", // equal runs: the first is compressed
		"2001:db8:10::1":                         "2001:db8:10::1",
		"ff02::1234":                             "ff02::1234",
		"2001:DB8:FFFF:FFFF:FFFF:FFFF:FFFF:FFFE": "2001:db8:ffff:ffff:ffff:ffff:ffff:fffe",
	} {
		got := string(appendInet6Ntop(nil, netip.MustParseAddr(in).As16()))
		if got != want {
			t.Errorf("inet_ntop(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestAppendHex16: every 16-bit word is written as strconv writes it.
func TestAppendHex16(t *testing.T) {
	for w := range 1 << 16 {
		if got, want := string(appendHex16([]byte("x"), uint16(w))), "x"+strconv.FormatUint(uint64(w), 16); got != want {
			t.Fatalf("%#x: %q, want %q", w, got, want)
		}
	}
}
