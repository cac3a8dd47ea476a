package conformance

// Cases for the tables as a whole: Info, the empty state, Zero, Flush, timeouts.

import (
	"errors"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"golang.org/x/sys/unix"
)

func testInfo(t *testing.T, c ipvs.Client) {
	info, err := c.Info()
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	want := ipvs.Info{Version: 0x010201, ConnTabSize: 4096}
	if info != want {
		t.Errorf("Info: got %+v, want %+v", info, want)
	}
}

func testEmpty(t *testing.T, c ipvs.Client) {
	expectServices(t, c)
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 900, TCPFin: 120, UDP: 300})
	expectDaemons(t, c)
	if _, err := c.Service(svc(ipvs.ProtoTCP, "10.0.0.1", 80)); !errors.Is(err, unix.ESRCH) {
		t.Errorf("Service of an empty table: got %v, want ESRCH", err)
	}
	// A dump for a missing service ends without an error.
	expectDests(t, c, svc(ipvs.ProtoTCP, "10.0.0.1", 80))
}

func testZero(t *testing.T, c ipvs.Client) {
	s := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	f := fwm(ipvs.AFInet6, 3)
	mustExec(t, c, addSvc(s), addSvc(f), addDst(s, dst("192.168.0.1", 80)))
	mustExec(t, c, req(ipvs.CmdZero, &s, nil), req(ipvs.CmdZero, &f, nil), req(ipvs.CmdZero, nil, nil))
	// ipvsadm sends its whole service for -Z; only the identity counts.
	mustExec(t, c, req(ipvs.CmdZero, &ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: addr("10.0.0.1"), Port: 80}, nil))
	expectErrno(t, c, unix.ESRCH, req(ipvs.CmdZero, &ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoUDP, Addr: addr("10.0.0.1"), Port: 80}, nil))
	// Counters are zero (no traffic in a fresh namespace) and stay so.
	expectServices(t, c, s, f)
	expectDests(t, c, s, dst("192.168.0.1", 80))
	// Zeroing all on an empty table is fine.
	mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdFlush}, ipvs.Request{Cmd: ipvs.CmdZero})
}

func testFlush(t *testing.T, c ipvs.Client) {
	mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdFlush})
	s := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	f := fwm(ipvs.AFInet, 2)
	six := svc(ipvs.ProtoUDP, "2001:db8::1", 53)
	mustExec(t, c, addSvc(s), addSvc(f), addSvc(six), addDst(s, dst("192.168.0.1", 80)),
		addDst(six, with(dst("192.168.0.1", 53), func(d *ipvs.Destination) { d.FwdMethod = ipvs.FwdTunnel })))
	mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdFlush})
	expectServices(t, c)
	expectDests(t, c, s)
	// Flushing keeps timeouts; and the mixed-family destination went with
	// its service, so a sync daemon may start again.
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 900, TCPFin: 120, UDP: 300})
	mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdNewDaemon, Daemon: &ipvs.Daemon{State: ipvs.DaemonMaster, Interface: "lo"}})
	mustExec(t, c, addSvc(s))
	expectServices(t, c, s)
	expectDests(t, c, s)
}

func testTimeouts(t *testing.T, c ipvs.Client) {
	set := func(tcp, fin, udp uint32) ipvs.Request {
		return ipvs.Request{Cmd: ipvs.CmdSetConfig, Timeouts: &ipvs.Timeouts{TCP: tcp, TCPFin: fin, UDP: udp}}
	}
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 900, TCPFin: 120, UDP: 300})
	mustExec(t, c, set(10, 0, 20))
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 10, TCPFin: 120, UDP: 20})
	mustExec(t, c, set(0, 0, 0))
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 10, TCPFin: 120, UDP: 20})
	mustExec(t, c, set(0, 1, 0))
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 10, TCPFin: 1, UDP: 20})
	// Each value must fit INT_MAX jiffies: 2147483647/250 = 8589934 s.
	mustExec(t, c, set(8589934, 8589934, 8589934))
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 8589934, TCPFin: 8589934, UDP: 8589934})
	expectErrno(t, c, unix.EINVAL, set(8589935, 0, 0))
	expectErrno(t, c, unix.EINVAL, set(5, 5, 4294967295))
	// A failed request changes nothing, not even its valid values.
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 8589934, TCPFin: 8589934, UDP: 8589934})
	mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdSetConfig})
	mustExec(t, c, set(900, 120, 300))
	expectTimeouts(t, c, ipvs.Timeouts{TCP: 900, TCPFin: 120, UDP: 300})
}
