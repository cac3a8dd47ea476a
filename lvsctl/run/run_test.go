package run

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/rules"
	"github.com/lvskit/lvskit/rules/desired"
)

// A health change is logged once for every real server its probe
// checks, in the file's order, however many services share the probe.
func TestRunLogsEveryServerOfAProbe(t *testing.T) {
	l := &runLoop{log: &bytes.Buffer{}}
	k := func(a string) health.TargetKey {
		return health.TargetKey{Addr: netip.MustParseAddrPort(a), Spec: "tcp"}
	}
	ref := func(svc, rs string) desired.DestRef {
		return desired.DestRef{Service: rules.ServiceKey{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr(svc), Port: 80},
			Dest: rules.DestKey{Family: ipvs.AFInet, Addr: netip.MustParseAddr(rs), Port: 80}}
	}
	l.probes = []checked{
		{ref: ref("10.0.0.1", "192.168.1.1"), key: k("192.168.1.1:80")},
		{ref: ref("10.0.0.1", "192.168.1.2"), key: k("192.168.1.2:80")},
		{ref: ref("10.0.0.2", "192.168.1.1"), key: k("192.168.1.1:80")},
		{ref: ref("10.0.0.3", "192.168.1.1"), key: k("192.168.1.1:80")},
	}
	l.logChange(health.Change{Key: k("192.168.1.1:80"), Old: health.Up, New: health.Down, Target: health.Target{Spec: health.Spec{Type: "tcp"}}, Result: "refused"})
	l.logChange(health.Change{Key: k("192.168.1.2:80"), Old: health.Up, New: health.Down, Target: health.Target{Spec: health.Spec{Type: "tcp"}}, Result: "refused"})
	want := "lvsctl run: -t 10.0.0.1:80 -r 192.168.1.1:80, -t 10.0.0.2:80 -r 192.168.1.1:80, -t 10.0.0.3:80 -r 192.168.1.1:80 up -> down (tcp check: refused)\n" +
		"lvsctl run: -t 10.0.0.1:80 -r 192.168.1.2:80 up -> down (tcp check: refused)\n"
	if got := l.log.(*bytes.Buffer).String(); got != want {
		t.Errorf("log\n%s\nwant\n%s", got, want)
	}
}
