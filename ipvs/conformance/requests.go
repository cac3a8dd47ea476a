package conformance

// Cases for how requests travel: Exec, pipelined answers, multi-datagram dumps.

import (
	"errors"
	"fmt"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"golang.org/x/sys/unix"
)

func testExecRejectsReads(t *testing.T, c ipvs.Client) {
	s := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	for _, cmd := range []ipvs.Op{ipvs.CmdGetService, ipvs.CmdGetDest, ipvs.CmdGetDaemon, ipvs.CmdGetConfig, ipvs.CmdGetInfo, 0, 200} {
		expectErrno(t, c, unix.EINVAL, req(cmd, &s, nil))
	}
	expectServices(t, c)
}

func testPipeline(t *testing.T, c ipvs.Client) {
	a := svc(ipvs.ProtoTCP, "10.0.0.1", 80)
	b := fwm(ipvs.AFInet6, 4)
	missing := svc(ipvs.ProtoUDP, "10.0.0.1", 80)
	type step struct {
		r    ipvs.Request
		want unix.Errno
	}
	steps := []step{
		{addSvc(a), 0},
		{addSvc(a), unix.EEXIST},
		{addSvc(b), 0},
		{addDst(missing, dst("192.168.0.1", 80)), unix.ESRCH},
		{addSvc(with(svc(ipvs.ProtoTCP, "10.0.0.2", 80), func(s *ipvs.Service) { s.Scheduler = "nosuch" })), unix.ENOENT},
	}
	var wantA, wantB []ipvs.Destination
	for i := range 40 {
		d := dst(fmt.Sprintf("192.168.1.%d", i+1), 80)
		steps = append(steps, step{addDst(a, d), 0})
		wantA = append([]ipvs.Destination{d}, wantA...)
		if i%7 == 3 {
			steps = append(steps, step{addDst(a, d), unix.EEXIST})
			steps = append(steps, step{addDst(a, dst("0.0.0.0", 80)), unix.EINVAL})
		}
		d6 := dst(fmt.Sprintf("2001:db8::%x", i+1), 0)
		steps = append(steps, step{addDst(b, d6), 0})
		wantB = append([]ipvs.Destination{d6}, wantB...)
	}
	steps = append(steps,
		step{delSvc(missing), unix.ESRCH},
		step{ipvs.Request{Cmd: ipvs.CmdSetConfig, Timeouts: &ipvs.Timeouts{TCP: 77}}, 0},
		step{ipvs.Request{Cmd: ipvs.CmdGetService}, unix.EINVAL}, // refused locally, still in order
		step{setDst(a, with(dst("192.168.1.1", 80), func(d *ipvs.Destination) { d.Weight = 9 })), 0},
		step{ipvs.Request{Cmd: ipvs.CmdSetConfig, Timeouts: &ipvs.Timeouts{UDP: 1 << 30}}, unix.EINVAL},
		step{daemonReq(ipvs.CmdDelDaemon, ipvs.Daemon{State: ipvs.DaemonMaster}), unix.ESRCH},
	)
	wantA[len(wantA)-1].Weight = 9

	for _, window := range []int{1, 3, 16} {
		t.Run(fmt.Sprintf("window%d", window), func(t *testing.T) {
			mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdFlush})
			p := c.Pipeline(window)
			var got []error
			for i, s := range steps {
				if err := p.Submit(s.r, func(err error) { got = append(got, err) }); err != nil {
					t.Fatalf("Submit %d: %v", i, err)
				}
			}
			if err := p.Flush(); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			if len(got) != len(steps) {
				t.Fatalf("got %d answers for %d requests", len(got), len(steps))
			}
			for i, s := range steps {
				switch {
				case s.want == 0 && got[i] != nil:
					t.Errorf("request %d (%s): got %v, want success", i, show(s.r), got[i])
				case s.want != 0 && !errors.Is(got[i], s.want):
					t.Errorf("request %d (%s): got %v, want %s", i, show(s.r), got[i], unix.ErrnoName(s.want))
				}
			}
			expectServices(t, c, a, stored(b))
			expectDests(t, c, a, wantA...)
			expectDests(t, c, b, wantB...)
			expectTimeouts(t, c, ipvs.Timeouts{TCP: 77, TCPFin: 120, UDP: 300})
			// A flushed pipeline can go on.
			if err := p.Submit(delSvc(a), func(err error) { got = append(got, err) }); err != nil {
				t.Fatalf("Submit after Flush: %v", err)
			}
			if err := p.Flush(); err != nil || len(got) != len(steps)+1 || got[len(steps)] != nil {
				t.Fatalf("delete after Flush: flush %v, answers %d, last %v", err, len(got), got[len(got)-1])
			}
			expectServices(t, c, stored(b))
		})
	}
}

// testLargeDumps covers answers that span many netlink datagrams.
func testLargeDumps(t *testing.T, c ipvs.Client) {
	p := c.Pipeline(64)
	var errs []error
	var want []ipvs.Service
	submit := func(r ipvs.Request) {
		if err := p.Submit(r, func(err error) {
			if err != nil {
				errs = append(errs, err)
			}
		}); err != nil {
			t.Fatalf("Submit: %v", err)
		}
	}
	for i := range 400 {
		s := with(svc(ipvs.ProtoTCP, fmt.Sprintf("10.2.%d.%d", i/250, i%250+1), uint16(i+1)), func(s *ipvs.Service) {
			s.Scheduler = []string{"rr", "wlc", "sh", "mh"}[i%4]
			s.Flags = ipvs.ServiceFlags(i%8) & (ipvs.FlagPersistent | ipvs.FlagOnePacket)
		})
		if s.Flags&ipvs.FlagPersistent != 0 {
			s.Timeout = 300
		}
		submit(addSvc(s))
		want = append(want, s)
	}
	big := svc(ipvs.ProtoTCP, "10.3.0.1", 80)
	submit(addSvc(big))
	want = append(want, big)
	var wantDests []ipvs.Destination
	for i := range 300 {
		d := with(dst(fmt.Sprintf("172.16.%d.%d", i/200, i%200+1), uint16(8000+i)), func(d *ipvs.Destination) {
			d.Weight, d.UThreshold, d.LThreshold = uint32(i), uint32(i*2), uint32(i)
		})
		submit(addDst(big, d))
		wantDests = append([]ipvs.Destination{d}, wantDests...)
	}
	if err := p.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if len(errs) > 0 {
		t.Fatalf("%d requests failed, first: %v", len(errs), errs[0])
	}
	expectServices(t, c, want...)
	expectDests(t, c, big, wantDests...)
}
