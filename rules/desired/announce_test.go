package desired

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/rules"
)

const announceDoc = `version: 2
announce: {when_all_down: keep}
services:
  - {protocol: tcp, address: 10.3.0.1, port: 80, scheduler: mh,
     check: {type: tcp}, destinations: [{address: 10.2.0.21, port: 80, method: route, weight: 1}]}
  - {protocol: udp, address: 10.3.0.1, port: 53, scheduler: mh,
     destinations: [{address: 10.2.0.21, port: 53, method: route, weight: 1}]}
  - {protocol: tcp, address: 10.3.0.2, port: 80, scheduler: rr, announce: false,
     destinations: [{address: 10.2.0.22, port: 80, method: route, weight: 1}]}
  - {fwmark: 7, family: inet, scheduler: rr, announce: "10.4.0.0/28",
     destinations: [{address: 10.2.0.23, port: 0, method: route, weight: 1}]}
  - {fwmark: 8, family: inet, scheduler: rr,
     destinations: [{address: 10.2.0.24, port: 0, method: route, weight: 1}]}
`

// TestAnnounceReads: with the document's announce, each address service
// counts for its address unless it says false, a firewall-mark service
// only under the prefix it names; the settings default as documented.
func TestAnnounceReads(t *testing.T) {
	_, h, err := Read("d.yaml", strings.NewReader(announceDoc), nil)
	if err != nil {
		t.Fatal(err)
	}
	if h == nil || h.Announce == nil {
		t.Fatal("no announce read")
	}
	a := h.Announce
	if a.Device != DefaultAnnounceDevice || a.WhenAllDown != KeepAnnouncing {
		t.Errorf("settings %+v", a)
	}
	key := func(s string) rules.ServiceKey {
		for k := range a.Prefixes {
			if k.String() == s {
				return k
			}
		}
		return rules.ServiceKey{}
	}
	want := map[string]string{"-t 10.3.0.1:80": "10.3.0.1/32", "-u 10.3.0.1:53": "10.3.0.1/32", "-f 7": "10.4.0.0/28"}
	if len(a.Prefixes) != len(want) {
		t.Errorf("prefixes %v, want %v", a.Prefixes, want)
	}
	for s, p := range want {
		if got := a.Prefixes[key(s)]; got != netip.MustParsePrefix(p) {
			t.Errorf("%s counts for %v, want %s", s, got, p)
		}
	}
	// A reload through the cache of decoded entries reads the same.
	var cache YAMLCache
	for range 2 {
		_, hc, err := ReadCached("d.yaml", strings.NewReader(announceDoc), nil, &cache)
		if err != nil || hc.Announce == nil || len(hc.Announce.Prefixes) != len(want) || hc.Announce.WhenAllDown != KeepAnnouncing {
			t.Errorf("through the cache: %v, %+v", err, hc)
		}
	}
	// Without the document's announce nothing is announced.
	plain := strings.Replace(announceDoc, "announce: {when_all_down: keep}\n", "", 1)
	plain = strings.Replace(plain, `announce: "10.4.0.0/28",`, "", 1)
	if _, h, err := Read("d.yaml", strings.NewReader(plain), nil); err != nil || h.Announce != nil {
		t.Errorf("without announce: %v, %+v", err, h)
	}
}

// TestAnnounceErrors: each mistake names its line.
func TestAnnounceErrors(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"when_all_down", "announce: {when_all_down: keep}", "announce: {when_all_down: maybe}",
			`d.yaml:2: announce.when_all_down "maybe": withdraw or keep`},
		{"device", "announce: {when_all_down: keep}", "announce: {device: a-much-too-long-name}",
			`d.yaml:2: announce.device "a-much-too-long-name": a device name of 1 to 12 letters, digits, '-' or '_'`},
		{"prefix", `announce: "10.4.0.0/28"`, `announce: "10.4.0.1/28"`,
			`d.yaml:10: services[3].announce "10.4.0.1/28": a prefix such as "203.0.113.0/28", its host bits 0`},
		{"outside", "announce: false,", `announce: "10.9.0.0/24",`,
			`d.yaml:8: services[2].announce 10.9.0.0/24 does not hold the service's address 10.3.0.2`},
		{"no document announce", "announce: {when_all_down: keep}\n", "",
			`d.yaml:9: services[3].announce: the document has no "announce" object, which turns announcing on`},
		{"version 1", "version: 2", "version: 1", `announce needs "version": 2`},
	} {
		doc := strings.Replace(announceDoc, tc.from, tc.to, 1)
		if tc.name == "version 1" {
			doc = strings.Replace(doc, "check: {type: tcp}, ", "", 1)
		}
		_, _, err := Read("d.yaml", strings.NewReader(doc), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %s", tc.name, err, tc.want)
		}
	}
}
