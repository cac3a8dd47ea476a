package ipvs_test

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/conformance"
)

func openFake(t *testing.T, k *fakeKernel) *ipvs.Conn {
	t.Helper()
	c, err := ipvs.OpenTransportForTest(k, testPort)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestConformanceOverNetlinkEncoding runs the shared suite through the
// netlink client and an in-memory kernel: every request and answer of the
// suite is encoded, framed, split over datagrams and decoded on the way.
func TestConformanceOverNetlinkEncoding(t *testing.T) {
	conformance.Run(t, func(t *testing.T) ipvs.Client { return openFake(t, newFakeKernel()) })
}

func TestConformanceWithStrangersOnTheSocket(t *testing.T) {
	conformance.Run(t, func(t *testing.T) ipvs.Client {
		k := newFakeKernel()
		k.perDump = 1
		c := openFake(t, k)
		k.strangers = true
		return c
	})
}

func TestOpenWithoutIPVSFamily(t *testing.T) {
	k := newFakeKernel()
	k.noFamily = true
	_, err := ipvs.OpenTransportForTest(k, testPort)
	if !errors.Is(err, unix.ENOPROTOOPT) {
		t.Fatalf("got %v, want ENOPROTOOPT", err)
	}
	var op *ipvs.OpError
	if !errors.As(err, &op) {
		t.Errorf("%v is not an *ipvs.OpError", err)
	}
}

func TestOpenRefusedGetInfo(t *testing.T) {
	k := newFakeKernel()
	k.failCmd[ipvs.CmdGetInfo] = unix.EPERM
	_, err := ipvs.OpenTransportForTest(k, testPort)
	if !errors.Is(err, unix.EPERM) {
		t.Fatalf("got %v, want EPERM", err)
	}
}

func TestNoAnswerIsAnErrorNotAHang(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k)
	k.silent = true
	err := c.Exec(ipvs.Request{Cmd: ipvs.CmdFlush})
	if !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("Exec with no answer: got %v, want EAGAIN", err)
	}
	// The conversation is out of step for good; every later call says so.
	k.silent = false
	if _, err := c.Services(); !errors.Is(err, unix.EAGAIN) {
		t.Errorf("Services after a lost answer: got %v, want the EAGAIN again", err)
	}
	if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdFlush}); !errors.Is(err, unix.EAGAIN) {
		t.Errorf("Exec after a lost answer: got %v", err)
	}
}

func TestSwallowedStopDaemonIsReportedAtOnce(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k)
	k.swallow[ipvs.CmdDelDaemon] = true
	if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdNewDaemon, Daemon: &ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo"}}); err != nil {
		t.Fatal(err)
	}
	err := c.Exec(ipvs.Request{Cmd: ipvs.CmdDelDaemon, Daemon: &ipvs.Daemon{State: ipvs.DaemonBackup}})
	if !errors.Is(err, ipvs.ErrNoAnswer) || !errors.Is(err, unix.EINTR) {
		t.Fatalf("got %v, want ErrNoAnswer and EINTR", err)
	}
	// The connection stays usable.
	if d, err := c.Daemons(); err != nil || len(d) != 0 {
		t.Errorf("Daemons: %+v, %v", d, err)
	}
}

// TestSwallowedAnswerInAPipeline: a daemon command the kernel handles
// without an answer is reported as such, between quiet requests that
// succeed and fail around it.
func TestSwallowedAnswerInAPipeline(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k)
	k.swallow[ipvs.CmdDelDaemon] = true
	p := c.Pipeline(8)
	var got []error
	done := func(err error) { got = append(got, err) }
	s := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 80, Scheduler: "rr", Netmask: 0xffffffff}
	reqs := []ipvs.Request{
		{Cmd: ipvs.CmdNewService, Service: &s},
		{Cmd: ipvs.CmdNewDaemon, Daemon: &ipvs.Daemon{State: ipvs.DaemonBackup, Interface: "lo"}},
		{Cmd: ipvs.CmdDelDaemon, Daemon: &ipvs.Daemon{State: ipvs.DaemonBackup}},
		{Cmd: ipvs.CmdNewService, Service: &s},
		{Cmd: ipvs.CmdDelService, Service: &s},
	}
	for _, r := range reqs {
		if err := p.Submit(r, done); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || got[0] != nil || got[1] != nil || !errors.Is(got[2], ipvs.ErrNoAnswer) || !errors.Is(got[3], unix.EEXIST) || got[4] != nil {
		t.Errorf("answers: %v", got)
	}
}

// TestQuietRequestsAreAnsweredByTheBarrier: changes go without NLM_F_ACK,
// so the kernel sends one answer per failure plus one per batch, and every
// request still hears its own result in order.
func TestQuietRequestsAreAnsweredByTheBarrier(t *testing.T) {
	var answers int
	spy := &spyKernel{fakeKernel: newFakeKernel(), onSend: func(int) {}}
	c, err := ipvs.OpenTransportForTest(spy, testPort)
	if err != nil {
		t.Fatal(err)
	}
	spy.onRecv = func(n int) { answers += n }
	p := c.Pipeline(16)
	var got []error
	s := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 80, Scheduler: "rr", Netmask: 0xffffffff}
	for i := range 40 {
		// Every fourth request adds the service again and fails.
		r := ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}
		if i%4 != 0 {
			d := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.AddrFrom4([4]byte{10, 1, 0, byte(i)}), Port: 80, FwdMethod: ipvs.FwdMasq, Weight: 1}
			r = ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d}
		}
		if err := p.Submit(r, func(err error) { got = append(got, err) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	for i, e := range got {
		if want := i%4 == 0 && i > 0; errors.Is(e, unix.EEXIST) != want || (!want && e != nil) {
			t.Errorf("request %d: %v", i, e)
		}
	}
	// 9 failures and one barrier per batch of 16 (3 batches).
	if len(got) != 40 || answers != 9+3 {
		t.Errorf("%d results, %d answers from the kernel; want 40 and 12", len(got), answers)
	}
}

func TestPipelineTransportFailureAnswersEveryRequest(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k)
	k.enobufs = 5
	p := c.Pipeline(100)
	var got []error
	var submitErr error
	// The same service 50 times: 49 failures, each answered.
	s := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.AddrFrom4([4]byte{10, 0, 0, 1}), Port: 80, Scheduler: "rr"}
	for range 50 {
		if err := p.Submit(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}, func(err error) { got = append(got, err) }); err != nil {
			submitErr = err
			break
		}
	}
	err := p.Flush()
	if submitErr != nil {
		t.Fatalf("Submit failed before anything was sent: %v", submitErr)
	}
	if !errors.Is(err, unix.ENOBUFS) {
		t.Fatalf("Flush: got %v, want ENOBUFS", err)
	}
	if len(got) != 50 {
		t.Fatalf("%d answers for 50 requests", len(got))
	}
	for i, e := range got {
		if !errors.Is(e, unix.ENOBUFS) {
			t.Errorf("answer %d: %v, want ENOBUFS", i, e)
		}
	}
	if err := p.Submit(ipvs.Request{Cmd: ipvs.CmdFlush}, nil); !errors.Is(err, unix.ENOBUFS) {
		t.Errorf("Submit on a failed pipeline: %v", err)
	}
}

// TestPipelineBatchesAndBoundsTheWindow checks the system-call economy a
// restore depends on: one datagram per window of requests, never more
// than window unanswered.
func TestPipelineBatchesAndBoundsTheWindow(t *testing.T) {
	sends := 0
	var maxOutstanding int
	spy := &spyKernel{fakeKernel: newFakeKernel(), onSend: func(outstanding int) {
		sends++
		maxOutstanding = max(maxOutstanding, outstanding)
	}}
	c2, err := ipvs.OpenTransportForTest(spy, testPort)
	if err != nil {
		t.Fatal(err)
	}
	sends, maxOutstanding = 0, 0
	p := c2.Pipeline(32)
	for i := range 320 {
		s := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoUDP, Addr: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), Port: 53, Scheduler: "rr"}
		if err := p.Submit(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if sends != 10 || maxOutstanding > 32+1 {
		t.Errorf("%d datagrams (want 10), at most %d messages in one (want <= 32 and a barrier)", sends, maxOutstanding)
	}
	svcs, err := c2.Services()
	if err != nil || len(svcs) != 320 {
		t.Errorf("Services: %d, %v", len(svcs), err)
	}
}

type spyKernel struct {
	*fakeKernel
	onSend func(messages int)
	onRecv func(answers int)
}

func (s *spyKernel) Send(b []byte) error {
	messages := 0
	for m := b; len(m) >= 16; m = m[(ne.Uint32(m)+3)&^3:] {
		messages++
	}
	err := s.fakeKernel.Send(b)
	s.onSend(messages)
	return err
}

func (s *spyKernel) Recv(max int) ([][]byte, error) {
	d, err := s.fakeKernel.Recv(max)
	if s.onRecv != nil {
		s.onRecv(len(d))
	}
	return d, err
}

func TestDecodePrefersStats64(t *testing.T) {
	k := newFakeKernel()
	c := openFake(t, k)
	s := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 80, Scheduler: "wlc", Netmask: 0xffffffff}
	d := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.MustParseAddr("10.0.0.2"), Port: 80, FwdMethod: ipvs.FwdRoute, Weight: 1}
	if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d}); err != nil {
		t.Fatal(err)
	}
	big := ipvs.Stats{Conns: 1<<32 + 5, InPkts: 1 << 40, OutPkts: 7, InBytes: 1 << 50, OutBytes: 9, CPS: 1<<33 + 1, InPPS: 2, OutPPS: 3, InBPS: 1 << 35, OutBPS: 4}
	if err := k.fake.SetServiceStats(s, big); err != nil {
		t.Fatal(err)
	}
	counters := ipvs.DestCounters{ActiveConns: 1, InactConns: 2, PersistConns: 3, Stats: big}
	if err := k.fake.SetDestinationCounters(s, d, counters); err != nil {
		t.Fatal(err)
	}
	svcs, err := c.Services()
	if err != nil || len(svcs) != 1 || svcs[0].Stats != big {
		t.Errorf("service stats: %+v, %v; want %+v", svcs, err, big)
	}
	dests, err := c.Destinations(s)
	if err != nil || !slices.Equal(dests, []ipvs.DestinationEntry{{Destination: d, DestCounters: counters}}) {
		t.Errorf("destinations: %+v, %v; want %+v", dests, err, d)
	}
	// Without the 64-bit counters: Stats zero, the connection counts kept.
	// Settings nest: an inner call's undo restores the outer setting.
	undo := ipvs.SkipStats(c, true)
	ipvs.SkipStats(c, true)()
	counters.Stats = ipvs.Stats{}
	svcs, err = c.Services()
	if err != nil || len(svcs) != 1 || svcs[0].Stats != (ipvs.Stats{}) || svcs[0].Service != s {
		t.Errorf("services without stats: %+v, %v", svcs, err)
	}
	dests, err = c.Destinations(s)
	if err != nil || !slices.Equal(dests, []ipvs.DestinationEntry{{Destination: d, DestCounters: counters}}) {
		t.Errorf("destinations without stats: %+v, %v; want %+v", dests, err, counters)
	}
	undo()
	if svcs, err = c.Services(); err != nil || svcs[0].Stats != big {
		t.Errorf("stats not read again after undo: %+v, %v", svcs, err)
	}
}

// BenchmarkPipelineSubmit is the client's own cost per pipelined change:
// encoding, batching and bookkeeping, in front of a kernel that does
// nothing but answer the barriers.
func BenchmarkPipelineSubmit(b *testing.B) {
	k := &nullKernel{fakeKernel: newFakeKernel()}
	c, err := ipvs.OpenTransportForTest(k, testPort)
	if err != nil {
		b.Fatal(err)
	}
	k.null = true
	s := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.0.3.250"), Port: 80, Scheduler: "wlc", Netmask: 0xffffffff}
	d := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.MustParseAddr("192.168.10.250"), Port: 80, FwdMethod: ipvs.FwdMasq, Weight: 1}
	req := ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d}
	p := c.Pipeline(256)
	done := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Submit(req, done); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		b.Fatal(err)
	}
}

// nullKernel, once null, answers only NOOP barriers.
type nullKernel struct {
	*fakeKernel
	null bool
}

func (k *nullKernel) Send(b []byte) error {
	if !k.null {
		return k.fakeKernel.Send(b)
	}
	for len(b) >= 16 {
		l := int(ne.Uint32(b))
		if h := (hdr{typ: ne.Uint16(b[4:]), flags: ne.Uint16(b[6:]), seq: ne.Uint32(b[8:])}); h.typ == 1 {
			k.ack(h, 0)
		}
		b = b[(l+3)&^3:]
	}
	return nil
}

// TestDumpServicesStopsCallingAfterAnError: the callback's error ends the
// calls, the dump is still read to its end, and the connection stays in
// step for the next request.
func TestDumpServicesStopsCallingAfterAnError(t *testing.T) {
	k := newFakeKernel()
	k.perDump = 2
	c := openFake(t, k)
	for i := range 7 {
		s := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), Port: 80, Scheduler: "wlc"}
		if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}); err != nil {
			t.Fatal(err)
		}
	}
	stop := errors.New("stop")
	calls := 0
	err := c.DumpServices(func(*ipvs.ServiceEntry) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 3 {
		t.Fatalf("DumpServices: %v after %d calls, want the callback's error after 3", err, calls)
	}
	svcs, err := c.AppendServices(nil)
	if err != nil || len(svcs) != 7 {
		t.Fatalf("AppendServices after the stopped dump: %d services, %v", len(svcs), err)
	}
}

// dumpView is a second transport to the same in-memory kernel, as Open's
// second socket is to the same namespace: it counts its requests, and
// closing it drops what it had not read.
type dumpView struct {
	k      *fakeKernel
	sends  int
	closed bool
}

func (v *dumpView) Send(b []byte) error {
	if v.closed {
		return unix.EBADF
	}
	v.sends++
	return v.k.Send(b)
}

func (v *dumpView) Recv(max int) ([][]byte, error) {
	if v.closed {
		return nil, unix.EBADF
	}
	return v.k.Recv(max)
}

func (v *dumpView) Close() error { v.closed, v.k.queue = true, nil; return nil }

func TestConformanceWithDumpSocket(t *testing.T) {
	conformance.Run(t, func(t *testing.T) ipvs.Client {
		k := newFakeKernel()
		k.perDump = 1
		c, err := ipvs.OpenTransportsForTest(k, &dumpView{k: k}, testPort)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	})
}

// TestLargeServiceLeavesDumpSocket: destination dumps go over the second
// transport until one takes more than SmallDumpLimit datagrams; that one
// is abandoned, the transport closed, and the service read again over the
// main one, as is every later service. Every listing is complete.
func TestLargeServiceLeavesDumpSocket(t *testing.T) {
	k := newFakeKernel()
	k.perDump = 1
	view := &dumpView{k: k}
	c, err := ipvs.OpenTransportsForTest(k, view, testPort)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sizes := []int{10, ipvs.SmallDumpLimit + 5, 3}
	var svcs []ipvs.Service
	for i, n := range sizes {
		s := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), Port: 80, Scheduler: "rr", Netmask: 0xffffffff}
		if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}); err != nil {
			t.Fatal(err)
		}
		for j := range n {
			d := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.AddrFrom4([4]byte{192, 168, byte(j >> 8), byte(j)}), Port: 80, Weight: 1}
			if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d}); err != nil {
				t.Fatal(err)
			}
		}
		svcs = append(svcs, s)
	}
	wantSends := []int{1, 2, 2} // the large one is tried once on the view, never again
	for i, s := range svcs {
		ds, err := c.Destinations(s)
		if err != nil {
			t.Fatalf("service %d: %v", i, err)
		}
		if len(ds) != sizes[i] {
			t.Errorf("service %d: %d destinations, want %d", i, len(ds), sizes[i])
		}
		if want, _ := k.fake.Destinations(s); len(want) != len(ds) || (len(ds) > 0 && want[0].Addr != ds[0].Addr) {
			t.Errorf("service %d: the listing differs from the kernel's", i)
		}
		if view.sends != wantSends[i] {
			t.Errorf("after service %d: %d dumps over the second transport, want %d", i, view.sends, wantSends[i])
		}
	}
	if !view.closed {
		t.Error("the second transport stayed open after a dump outgrew it")
	}
	// The main transport is still in step.
	if _, err := c.Services(); err != nil {
		t.Errorf("listing services afterwards: %v", err)
	}
}

// TestReplyDatagramsCountsAnswers: a dump answered in one datagram counts
// 1 (a snapshot); one spread over several counts each that carried
// answers, not the NLMSG_DONE after them.
func TestReplyDatagramsCountsAnswers(t *testing.T) {
	k := newFakeKernel()
	c, err := ipvs.OpenTransportForTest(k, testPort)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.AddrFrom4([4]byte{10, 0, 0, 1}), Port: 80, Scheduler: "rr", Netmask: 0xffffffff}
	if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}); err != nil {
		t.Fatal(err)
	}
	for j, want := range []int{1, 1, 1, 2, 2, 2, 3} { // after j+1 destinations, 3 per datagram
		d := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.AddrFrom4([4]byte{192, 168, 0, byte(j + 1)}), Port: 80, Weight: 1}
		if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d}); err != nil {
			t.Fatal(err)
		}
		ds, err := c.Destinations(s)
		if err != nil || len(ds) != j+1 {
			t.Fatalf("%d destinations: got %d, %v", j+1, len(ds), err)
		}
		if got := c.ReplyDatagrams(); got != want {
			t.Errorf("%d destinations, 3 a datagram: ReplyDatagrams %d, want %d", j+1, got, want)
		}
	}
}
