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
