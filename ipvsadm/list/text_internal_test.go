package list

import (
	"net/netip"
	"testing"
)

func TestAddrPortCap(t *testing.T) {
	o := &Options{Numeric: true}
	// An IPv6 address:port is at most 47 characters, so only names reach
	// the 59-character limit; a numeric one is never cut.
	got := string(AppendAddrPort(nil, 10, netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255"), 65535, 6, o))
	if got != "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535" {
		t.Errorf("got %q", got)
	}
}
