package run

import (
	"strings"
	"testing"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/rules"
	"github.com/lvskit/lvskit/rules/desired"
)

// TestEffectiveDynamicWeight: a checked real server up with a weight from
// its check serves at that weight, 0 included; up without one, at the
// file's; down, at 0 whatever weight its check last gave.
func TestEffectiveDynamicWeight(t *testing.T) {
	doc := `version: 2
services:
  - protocol: tcp
    address: 10.0.0.1
    port: 80
    scheduler: wrr
    check: {type: tcp}
    destinations:
      - {address: 192.168.1.1, port: 80, method: masq, weight: 3}
      - {address: 192.168.1.2, port: 80, method: masq, weight: 4}
      - {address: 192.168.1.3, port: 80, method: masq, weight: 5}
      - {address: 192.168.1.4, port: 80, method: masq, weight: 6}
`
	want, h, err := desired.Read("d.yaml", strings.NewReader(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	probes := probeTargets(want, h, map[string]uint32{})
	w := func(v uint32) *uint32 { return &v }
	states := map[string]struct {
		st     health.State
		weight *uint32
	}{
		"192.168.1.1:80": {health.Up, w(9)},
		"192.168.1.2:80": {health.Up, w(0)},
		"192.168.1.3:80": {health.Up, nil},
		"192.168.1.4:80": {health.Down, w(9)},
	}
	state := func(k health.TargetKey) (health.State, *uint32) {
		s := states[k.Addr.String()]
		return s.st, s.weight
	}
	eff, allDown := effective(want, h, probes, state, nil, map[desired.DestRef]bool{})
	if len(allDown) != 0 {
		t.Errorf("all down: %v", allDown)
	}
	got := map[string]uint32{}
	for _, d := range eff.Services[0].Dests {
		got[rules.DestKeyOf(&d.Destination).String()] = d.Weight
	}
	for addr, wt := range map[string]uint32{"192.168.1.1:80": 9, "192.168.1.2:80": 0, "192.168.1.3:80": 5, "192.168.1.4:80": 0} {
		if got[addr] != wt {
			t.Errorf("%s: weight %d, want %d (table %v)", addr, got[addr], wt, got)
		}
	}
	// The file's table is left as it was.
	if want.Services[0].Dests[0].Weight != 3 {
		t.Errorf("effective changed the file's weight to %d", want.Services[0].Dests[0].Weight)
	}
}

// TestProbeTargetsPing: a ping of a direct-routing real server goes to
// its own address, without a probe service (via vip, the default for
// direct routing, is not for pings); one address serving two services
// on two ports has one ping; an http check of the same server still
// goes through the VIP.
func TestProbeTargetsPing(t *testing.T) {
	doc := `version: 2
services:
  - protocol: tcp
    address: 10.0.0.1
    port: 80
    scheduler: wrr
    check: {type: ping}
    destinations:
      - {address: 192.168.1.1, port: 80, method: route, weight: 1}
  - protocol: tcp
    address: 10.0.0.1
    port: 443
    scheduler: wrr
    check: {type: ping}
    destinations:
      - {address: 192.168.1.1, port: 443, method: route, weight: 1}
  - protocol: tcp
    address: 10.0.0.2
    port: 80
    scheduler: wrr
    check: {type: http}
    destinations:
      - {address: 192.168.1.1, port: 80, method: route, weight: 1}
`
	want, h, err := desired.Read("d.yaml", strings.NewReader(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	probes := probeTargets(want, h, map[string]uint32{})
	if len(probes) != 3 {
		t.Fatalf("%d probe targets, want 3", len(probes))
	}
	for i, p := range probes[:2] {
		if p.probe != nil || p.mark != 0 || p.key.Addr.String() != "192.168.1.1:0" || p.target().Spec.Via != "direct" {
			t.Errorf("ping %d: probe service %v, mark %d, key %s, via %q; want none, 0, 192.168.1.1:0, direct", i, p.probe, p.mark, p.key.Addr, p.target().Spec.Via)
		}
	}
	if probes[0].key != probes[1].key {
		t.Errorf("the two pings of 192.168.1.1 have keys %+v and %+v: they should share one probe", probes[0].key, probes[1].key)
	}
	if p := probes[2]; p.probe == nil || p.mark == 0 || p.target().Spec.Via != "vip" {
		t.Errorf("http check of a direct-routing server: probe service %v, mark %d, via %q; want via the VIP", p.probe, p.mark, p.target().Spec.Via)
	}
	ts, err := health.Prepare(len(probes), func(i int) health.Target { return probes[i].target() })
	if err != nil || ts == nil {
		t.Errorf("the targets do not prepare: %v", err)
	}
}

// TestAddWeight: the dynamic checks of a real server each move the file's
// weight by their difference to it, within 0 and the kernel's largest; a
// check without a weight changes nothing.
func TestAddWeight(t *testing.T) {
	u := func(v uint32) *uint32 { return &v }
	var w *uint32
	w = addWeight(w, nil, 5)
	if w != nil {
		t.Fatalf("no dynamic check: %d, want the file's (nil)", *w)
	}
	w = addWeight(w, u(7), 5)
	w = addWeight(w, nil, 5)
	if w == nil || *w != 7 {
		t.Fatalf("one dynamic check at 7: %v, want 7", w)
	}
	if w = addWeight(w, u(9), 5); *w != 11 {
		t.Errorf("7 and 9 of 5: %d, want 11", *w)
	}
	if w = addWeight(u(1), u(0), 5); *w != 0 {
		t.Errorf("1 and 0 of 5: %d, want 0", *w)
	}
}

// TestSeveralChecksViaVIP: the via-vip checks of a direct-routing real
// server share its one mark and its one probe service, however many it
// has; the server is up only while each of its checks is.
func TestSeveralChecksViaVIP(t *testing.T) {
	doc := `version: 2
services:
  - protocol: tcp
    address: 10.0.0.1
    port: 80
    scheduler: wrr
    checks: [{type: tcp}, {type: http, port: 8080}, {type: exec, command: [/bin/true]}]
    destinations:
      - {address: 192.168.1.1, port: 80, method: route, weight: 3}
      - {address: 192.168.1.2, port: 80, method: route, weight: 4}
`
	want, h, err := desired.Read("d.yaml", strings.NewReader(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	probes := probeTargets(want, h, map[string]uint32{})
	if len(probes) != 6 {
		t.Fatalf("%d probes, want 6", len(probes))
	}
	for i := 0; i < 6; i += 3 {
		a, b, x := &probes[i], &probes[i+1], &probes[i+2]
		if a.mark == 0 || a.mark != b.mark || a.probe == nil || b.probe != nil || x.probe != nil || x.mark != 0 {
			t.Errorf("real server %v: marks %d %d %d, probe services %v %v %v; want one mark and one probe service", a.ref.Dest, a.mark, b.mark, x.mark, a.probe != nil, b.probe != nil, x.probe != nil)
		}
	}
	// 192.168.1.2's http check (to port 8080 through the VIP) is down.
	state := func(k health.TargetKey) (health.State, *uint32) {
		if k.Addr.Port() == 8080 && k.Mark == probes[3].mark {
			return health.Down, nil
		}
		return health.Up, nil
	}
	eff, _ := effective(want, h, probes, state, nil, map[desired.DestRef]bool{})
	if len(eff.Services) != 3 {
		t.Fatalf("%d services, want the service and 2 probe services", len(eff.Services))
	}
	got := map[string]uint32{}
	for _, d := range eff.Services[0].Dests {
		got[rules.DestKeyOf(&d.Destination).String()] = d.Weight
	}
	if got["192.168.1.1:80"] != 3 || got["192.168.1.2:80"] != 0 {
		t.Errorf("weights %v, want 192.168.1.1:80 at 3 and 192.168.1.2:80, whose http check is down, at 0", got)
	}
}
