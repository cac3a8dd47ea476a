package cmdline

import (
	"math"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
)

func TestStringToNumber(t *testing.T) {
	for _, tc := range []struct {
		s        string
		min, max int64
		want     int64
		ok       bool
	}{
		{"10", 0, 100, 10, true},
		{" 10", 0, 100, 10, true},  // strtol skips leading blanks
		{"\t+3", 0, 100, 3, true},  // and takes a sign
		{"010", 0, 100, 10, true},  // base 10 even with a leading zero
		{"0x10", 0, 100, 0, false}, // no hex
		{"10 ", 0, 100, 0, false},  // trailing text
		{"1.5", 0, 100, 0, false},
		{"", 0, 100, 0, false},
		{" ", 0, 100, 0, false},
		{"+", 0, 100, 0, false},
		{"-1", 0, 100, 0, false},
		{"-1", -5, 100, -1, true},
		{"2147483647", 0, math.MaxInt32, math.MaxInt32, true},
		{"2147483648", 0, math.MaxInt32, 0, false},
		{"99999999999999999999", 0, math.MaxInt64, 0, false}, // ERANGE
		{"65535", 0, 65535, 65535, true},
		{"65536", 0, 65535, 0, false},
	} {
		got, ok := stringToNumber(tc.s, tc.min, tc.max)
		if got != tc.want || ok != tc.ok {
			t.Errorf("stringToNumber(%q, %d, %d) = %d, %v; want %d, %v", tc.s, tc.min, tc.max, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseFwmark(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want uint32
		ok   bool
	}{
		{"1", 1, true}, {"4294967295", 4294967295, true}, {"2147483649", 2147483649, true},
		{"0", 0, false}, {"-5", 0, false}, {"abc", 0, false}, {"12abc", 0, false},
		{"4294967296", 0, false}, {"0x10", 0, false}, {"-0", 0, false}, {" 7", 7, true},
	} {
		got, ok := parseFwmark(tc.s)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseFwmark(%q) = %d, %v; want %d, %v", tc.s, got, ok, tc.want, tc.ok)
		}
	}
}

func TestAtoi(t *testing.T) {
	for s, want := range map[string]int32{
		"64": 64, "64x": 64, " 64": 64, "abc": 0, "-1": -1, "4294967360": 64,
		"99999999999999999999": -1, // strtol clamps to LONG_MAX, truncated to int
	} {
		if got := cAtoi(s); got != want {
			t.Errorf("atoi(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestParseHostAddress(t *testing.T) {
	r := testResolver(t)
	type res struct {
		family  ipvs.Family
		addr    string
		port    uint16
		hasPort bool
	}
	for _, tc := range []struct {
		s     string
		proto ipvs.Protocol
		want  *res // nil: invalid
	}{
		{"1.2.3.4:80", 6, &res{2, "1.2.3.4", 80, true}},
		{"1.2.3.4", 6, &res{2, "1.2.3.4", 0, false}},
		{"10.1:80", 6, &res{2, "10.0.0.1", 80, true}},
		{"0x0a000002:80", 6, &res{2, "10.0.0.2", 80, true}},
		{"167772163:80", 6, &res{2, "10.0.0.3", 80, true}},
		{"010.0.0.9", 6, &res{2, "8.0.0.9", 0, false}},
		{"167772164", 6, nil}, // only digits
		{"", 6, nil},
		{"1.2.3.4:80:90", 6, nil},
		{"1.2.3.4:", 6, nil},
		{"1.2.3.4:+80", 6, &res{2, "1.2.3.4", 80, true}},
		{"1.2.3.4:0x50", 6, nil},
		{"1.2.3.4:65536", 6, nil},
		{"1.2.3.4:-1", 6, nil},
		{"999.1.1.1:80", 6, nil},
		{"nosuchhost:80", 6, nil},
		{"vip1:http", 6, &res{2, "10.0.0.1", 80, true}},
		{"vip1.example.com:www", 6, &res{2, "10.0.0.1", 80, true}},
		{"localhost:80", 6, &res{2, "127.0.0.1", 80, true}},
		{"vip6.example.com:80", 6, nil}, // IPv6-only name
		{"10.0.0.8:http-alt", 6, &res{2, "10.0.0.8", 8080, true}},
		{"10.0.0.8:http-alt", 17, nil}, // TCP-only service name
		{"10.0.0.8:domain", 17, &res{2, "10.0.0.8", 53, true}},
		{"10.0.0.8:http", 0, nil},   // no protocol yet: names never resolve
		{"10.0.0.8:http", 132, nil}, // no sctp entries in Debian's services
		{"10.0.0.7:80 ", 6, nil},
		{"[2001:db8::1]:80", 6, &res{10, "2001:db8::1", 80, true}},
		{"[2001:db8::1]:http", 6, &res{10, "2001:db8::1", 80, true}},
		{"[2001:db8::1]", 6, nil},
		{"[2001:db8::1]80", 6, nil},
		{"[2001:db8::1", 6, nil},
		{"[2001:db8::1]:", 6, nil},
		{"2001:db8::1", 6, &res{10, "2001:db8::1", 0, false}},
		{"2001:db8::1:80", 6, &res{10, "2001:db8::1:80", 0, false}},
		{"::ffff:1.2.3.5", 6, &res{10, "::ffff:1.2.3.5", 0, false}},
		{"[::]:80", 6, &res{10, "::", 80, true}},
		{"[1.2.3.4]:80", 6, &res{2, "1.2.3.4", 0, false}}, // the port is lost
		{"[vip1]:80", 6, &res{2, "10.0.0.1", 0, false}},
		{"[1.2.3.4:90]:80", 6, &res{2, "1.2.3.4", 90, true}},
		{"[fe80::1%eth0]:80", 6, nil},
	} {
		h, ok := parseHostAddress(tc.s, tc.proto, r)
		switch {
		case tc.want == nil && ok:
			t.Errorf("%q/%d: got %+v, want invalid", tc.s, tc.proto, h)
		case tc.want != nil && !ok:
			t.Errorf("%q/%d: invalid, want %+v", tc.s, tc.proto, *tc.want)
		case tc.want != nil:
			got := res{h.family, h.addr.String(), h.port, h.hasPort}
			if got != *tc.want {
				t.Errorf("%q/%d: got %+v, want %+v", tc.s, tc.proto, got, *tc.want)
			}
		}
	}
}

func TestParseNetmask4(t *testing.T) {
	r := testResolver(t)
	for s, want := range map[string]uint32{
		"255.255.255.0": 0xffffff00, "24": 24, "0.0.0.0": 0, "255.0.255.0": 0xff00ff00, "vip1": 0x0a000001,
	} {
		if got, ok := parseNetmask4(s, r); !ok || got != want {
			t.Errorf("%q: got %#x, %v; want %#x", s, got, ok, want)
		}
	}
	if _, ok := parseNetmask4("bad", r); ok {
		t.Error("bad accepted")
	}
}

func TestParseSchedFlags(t *testing.T) {
	for _, tc := range []struct {
		sched, arg string
		flags      ipvs.ServiceFlags
		failure    string
		crash      bool
	}{
		{"", "flag-1", 0x08, "", false},
		{"rr", "flag-1,,flag-2", 0x18, "", false},
		{"mh", "flag-3", 0x20, "", false},
		{"sh", "sh-fallback,sh-port", 0x18, "", false},
		{"mh", "mh-fallback,mh-port", 0x18, "", false},
		{"", "sh-port", 0, "incompatible scheduler flag `sh-port'", false},
		{"rr", "sh-port", 0, "incompatible scheduler flag `sh-port'", false},
		{"sh", "mh-port", 0, "incompatible scheduler flag `mh-port'", false},
		{"rr", "flag-1,bogus", 0, "invalid scheduler flag `bogus'", false},
		{"rr", "foo,sh-port", 0, "invalid scheduler flag `foo'", false},
		{"rr", ",", 0, "", true},
		{"rr", ",,,", 0, "", true},
	} {
		r := parseSchedFlags(tc.sched, tc.arg)
		if r.flags != tc.flags && tc.failure == "" || r.failure != tc.failure || r.crash != tc.crash {
			t.Errorf("%q %q: got %+v", tc.sched, tc.arg, r)
		}
	}
}

func TestParseMcastGroup(t *testing.T) {
	for s, want := range map[string]string{
		"224.0.0.81":       "",
		"239.255.255.255":  "",
		"ff02::1234":       "",
		"1.2.3.4":          "invalid IPv4 mcast-group `1.2.3.4'",
		"foo":              "invalid IPv4 mcast-group `foo'",
		"224.000.0.1":      "invalid IPv4 mcast-group `224.000.0.1'",
		"ff02::zz":         "invalid IPv6 mcast-group `ff02::zz'",
		"2001:db8::1":      "invalid IPv6 mcast-group `2001:db8::1'",
		"::ffff:224.0.0.1": "invalid IPv6 mcast-group `::ffff:224.0.0.1'",
	} {
		if _, got := parseMcastGroup(s); got != want {
			t.Errorf("%q: got %q, want %q", s, got, want)
		}
	}
}
