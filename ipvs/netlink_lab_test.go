//go:build lab

package ipvs_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/conformance"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"github.com/lvskit/lvskit/lab/labtest"
)

// openInNetns gives the test a fresh network namespace and our client in it.
func openInNetns(t testing.TB) *ipvs.Conn {
	t.Helper()
	labtest.Netns(t)
	c, err := ipvs.Open()
	if err != nil {
		t.Fatalf("ipvs.Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestConformanceKernel runs the shared suite against the running kernel,
// each case in its own network namespace. The host runs the same suite
// against the fake (ipvs/ipvstest).
func TestConformanceKernel(t *testing.T) {
	conformance.Run(t, func(t *testing.T) ipvs.Client { return openInNetns(t) })
}

// TestInfoMatchesReferenceIpvsadm: the version line our Info produces is
// the first line Debian's ipvsadm prints.
func TestInfoMatchesReferenceIpvsadm(t *testing.T) {
	c := openInNetns(t)
	info, err := c.Info()
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	got := fmt.Sprintf("IP Virtual Server version %d.%d.%d (size=%d)",
		info.Version>>16, info.Version>>8&0xff, info.Version&0xff, info.ConnTabSize)
	res := labtest.Run(t, "", labtest.RefIpvsadm, "-Ln")
	if res.Code != 0 {
		t.Fatalf("%s -Ln: exit %d, stderr %q", labtest.RefIpvsadm, res.Code, res.Stderr)
	}
	first, _, _ := strings.Cut(res.Stdout, "\n")
	if got != first {
		t.Errorf("version line:\n ours      %q\n ipvsadm's %q", got, first)
	}
}

// TestOpenMissingFamilyIsENOPROTOOPT asks the kernel's generic netlink
// controller for a family that does not exist, as Open does on a kernel
// without IPVS.
func TestOpenMissingFamilyIsENOPROTOOPT(t *testing.T) {
	labtest.Netns(t)
	c, err := ipvs.OpenFamilyForTest("NOSUCHFAMILY")
	if err == nil {
		c.Close()
		t.Fatal("open of a missing family succeeded")
	}
	if !errors.Is(err, unix.ENOPROTOOPT) {
		t.Errorf("got %v, want an error matching ENOPROTOOPT", err)
	}
}

// TestOpenWithoutCapNetAdminIsEPERM runs Open as user nobody in a child
// process: the kernel refuses GET_INFO and Open reports EPERM.
func TestOpenWithoutCapNetAdminIsEPERM(t *testing.T) {
	if os.Getenv("LVSKIT_IPVS_OPEN_AS_NOBODY") == "1" {
		_, err := ipvs.Open()
		fmt.Printf("open-result: eperm=%v err=%v\n", errors.Is(err, unix.EPERM), err)
		return
	}
	labtest.Require(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenWithoutCapNetAdminIsEPERM$", "-test.v")
	cmd.Env = append(os.Environ(), "LVSKIT_IPVS_OPEN_AS_NOBODY=1")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child as nobody: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "open-result: eperm=true") {
		t.Errorf("child as nobody did not get EPERM from Open:\n%s", out)
	}
}

// TestReceiveTimeoutReachesCaller: a wait for an answer that never comes
// ends with EAGAIN after the timeout instead of blocking forever.
func TestReceiveTimeoutReachesCaller(t *testing.T) {
	c := openInNetns(t)
	start := time.Now()
	err := ipvs.WaitForNothingForTest(c, 200*time.Millisecond)
	took := time.Since(start)
	if !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("got %v, want EAGAIN", err)
	}
	if took < 150*time.Millisecond || took > 5*time.Second {
		t.Errorf("timeout took %v, want about 200ms", took)
	}
}

// TestPipelineOverrunReportsENOBUFS: when the kernel drops answers
// because the receive buffer is full, the pipeline fails with ENOBUFS and
// every unanswered request hears about it. Successful changes are not
// answered, so the requests fail: the same service added 2000 times.
func TestPipelineOverrunReportsENOBUFS(t *testing.T) {
	c := openInNetns(t)
	if err := ipvs.ShrinkReceiveBufferForTest(c); err != nil {
		t.Fatalf("shrink receive buffer: %v", err)
	}
	const n = 2000
	p := c.Pipeline(n)
	answers := 0
	var failures []error
	var submitErr error
	s := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.AddrFrom4([4]byte{10, 0, 0, 1}), Port: 80, Scheduler: "rr", Netmask: 0xffffffff}
	for range n {
		err := p.Submit(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}, func(err error) {
			answers++
			if err != nil {
				failures = append(failures, err)
			}
		})
		if err != nil {
			submitErr = err
			break
		}
	}
	flushErr := p.Flush()
	if submitErr == nil && flushErr == nil {
		t.Fatal("no transport error although the receive buffer cannot hold the answers")
	}
	err := flushErr
	if submitErr != nil {
		err = submitErr
	}
	if !errors.Is(err, unix.ENOBUFS) {
		t.Errorf("transport error %v, want ENOBUFS", err)
	}
	if answers == 0 || len(failures) == 0 || !errors.Is(failures[len(failures)-1], unix.ENOBUFS) {
		t.Errorf("%d answers, %d failures; the last unanswered request should carry ENOBUFS", answers, len(failures))
	}
	// The connection is unusable afterwards, and says so.
	if _, err := c.Services(); err == nil {
		t.Error("Services on a broken connection succeeded")
	}
}

// TestStopRightAfterStartIsNotAHang: stopping a sync daemon whose thread
// has not run yet makes the kernel's handler return EINTR, which netlink
// swallows: no answer at all (ipvsadm 1.31 would wait forever). The client
// must notice at once, say so with ErrNoAnswer, and the daemon must be gone.
func TestStopRightAfterStartIsNotAHang(t *testing.T) {
	c := openInNetns(t)
	if err := c.SetTimeout(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	unanswered := 0
	for i := range 30 {
		state := ipvs.DaemonBackup
		if i%2 == 1 {
			state = ipvs.DaemonMaster
		}
		mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdNewDaemon, Daemon: &ipvs.Daemon{State: state, Interface: "lo"}})
		err := c.Exec(ipvs.Request{Cmd: ipvs.CmdDelDaemon, Daemon: &ipvs.Daemon{State: state}})
		switch {
		case err == nil:
		case errors.Is(err, ipvs.ErrNoAnswer) && errors.Is(err, unix.EINTR):
			unanswered++
		default:
			t.Fatalf("stop %d: %v", i, err)
		}
		if d, err := c.Daemons(); err != nil || len(d) != 0 {
			t.Fatalf("after stop %d: daemons %+v, %v", i, d, err)
		}
	}
	t.Logf("30 start/stop pairs in %v, %d stops went unanswered by the kernel", time.Since(start), unanswered)
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("30 start/stop pairs took %v: a missing answer was waited for", took)
	}
}

// ---- moby/ipvs as an independent reader (docs/decisions/0002) ----------

// TestMobyReadsWhatWeWrite writes services and destinations with our client
// and reads them back with moby/ipvs, an independent implementation of the
// same wire format: ports, addresses, families, weights, flags, timeouts
// and netmasks must survive the trip.
func TestMobyReadsWhatWeWrite(t *testing.T) {
	c := openInNetns(t)
	persistent := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 443,
		Scheduler: "sh", Flags: ipvs.FlagPersistent | ipvs.FlagSched1, Timeout: 360, Netmask: 0xffffff00}
	six := ipvs.Service{Family: ipvs.AFInet6, Protocol: ipvs.ProtoUDP, Addr: netip.MustParseAddr("2001:db8::1"), Port: 5353,
		Scheduler: "rr", Flags: ipvs.FlagOnePacket, Netmask: 96}
	mark := ipvs.Service{Family: ipvs.AFInet, FWMark: 0x1234, Scheduler: "wlc", Netmask: 0xffffffff}
	dests := map[*ipvs.Service][]ipvs.Destination{
		&persistent: {
			{Family: ipvs.AFInet, Addr: netip.MustParseAddr("192.168.0.1"), Port: 8443, FwdMethod: ipvs.FwdMasq, Weight: 65535, UThreshold: 100, LThreshold: 50},
			{Family: ipvs.AFInet, Addr: netip.MustParseAddr("192.168.0.2"), Port: 443, FwdMethod: ipvs.FwdRoute, Weight: 0},
			{Family: ipvs.AFInet6, Addr: netip.MustParseAddr("2001:db8:2::9"), Port: 443, FwdMethod: ipvs.FwdTunnel, Weight: 3},
		},
		&six:  {{Family: ipvs.AFInet6, Addr: netip.MustParseAddr("2001:db8:1::5"), Port: 53, FwdMethod: ipvs.FwdMasq, Weight: 258}},
		&mark: {{Family: ipvs.AFInet, Addr: netip.MustParseAddr("192.168.0.3"), FwdMethod: ipvs.FwdTunnel, Weight: 1}},
	}
	for _, s := range []*ipvs.Service{&persistent, &six, &mark} {
		mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdNewService, Service: s})
		for _, d := range dests[s] {
			mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdNewDest, Service: s, Dest: &d})
		}
	}
	mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdSetConfig, Timeouts: &ipvs.Timeouts{TCP: 1000, TCPFin: 33, UDP: 44}})

	h, err := mobyipvs.New("")
	if err != nil {
		t.Fatalf("moby ipvs.New: %v", err)
	}
	defer h.Close()
	got, err := h.GetServices()
	if err != nil {
		t.Fatalf("moby GetServices: %v", err)
	}
	if len(got) != 3 {
		t.Fatalf("moby sees %d services, want 3", len(got))
	}
	for _, s := range []*ipvs.Service{&persistent, &six, &mark} {
		var m *mobyipvs.Service
		for _, g := range got {
			if g.FWMark == s.FWMark && g.Port == s.Port && g.AddressFamily == uint16(s.Family) {
				m = g
			}
		}
		if m == nil {
			t.Errorf("moby does not see %+v", *s)
			continue
		}
		want := mobyService(s)
		if m.AddressFamily != want.AddressFamily || m.Protocol != want.Protocol || !m.Address.Equal(want.Address) ||
			m.Port != want.Port || m.FWMark != want.FWMark || m.SchedName != want.SchedName ||
			m.Flags&^uint32(ipvs.FlagHashed) != want.Flags || m.Timeout != want.Timeout || m.Netmask != want.Netmask {
			t.Errorf("moby reads service\n %+v\nwant\n %+v", *m, *want)
		}
		md, err := h.GetDestinations(m)
		if err != nil {
			t.Fatalf("moby GetDestinations: %v", err)
		}
		wd := dests[s]
		if len(md) != len(wd) {
			t.Errorf("moby sees %d destinations of %+v, want %d", len(md), *s, len(wd))
			continue
		}
		// Both list the kernel's order: most recently added first.
		for i, d := range wd {
			g := md[len(md)-1-i]
			ip := net.IP(d.Addr.AsSlice())
			if !g.Address.Equal(ip) || g.Port != d.Port || g.AddressFamily != uint16(d.Family) || g.Weight != int(d.Weight) ||
				g.ConnectionFlags&mobyipvs.ConnectionFlagFwdMask != uint32(d.FwdMethod) ||
				g.UpperThreshold != d.UThreshold || g.LowerThreshold != d.LThreshold {
				t.Errorf("moby reads destination\n %+v\nwant\n %+v", *g, d)
			}
		}
	}
	cfg, err := h.GetConfig()
	if err != nil {
		t.Fatalf("moby GetConfig: %v", err)
	}
	if cfg.TimeoutTCP != 1000*time.Second || cfg.TimeoutTCPFin != 33*time.Second || cfg.TimeoutUDP != 44*time.Second {
		t.Errorf("moby GetConfig: %+v, want 1000s 33s 44s", *cfg)
	}
}

// TestWeReadWhatMobyWrites is the other direction: moby/ipvs writes, our
// client reads.
func TestWeReadWhatMobyWrites(t *testing.T) {
	c := openInNetns(t)
	h, err := mobyipvs.New("")
	if err != nil {
		t.Fatalf("moby ipvs.New: %v", err)
	}
	defer h.Close()
	ms := &mobyipvs.Service{AddressFamily: unix.AF_INET, Protocol: unix.IPPROTO_TCP, Address: net.ParseIP("10.0.0.9").To4(), Port: 8080,
		SchedName: "lc", Flags: uint32(ipvs.FlagPersistent), Timeout: 120, Netmask: hostOrder(0xffff0000)}
	m6 := &mobyipvs.Service{AddressFamily: unix.AF_INET6, FWMark: 77, SchedName: "rr", Netmask: 128}
	if err := h.NewService(ms); err != nil {
		t.Fatalf("moby NewService: %v", err)
	}
	if err := h.NewService(m6); err != nil {
		t.Fatalf("moby NewService: %v", err)
	}
	md := &mobyipvs.Destination{AddressFamily: unix.AF_INET, Address: net.ParseIP("192.168.7.7").To4(), Port: 80,
		Weight: 12, ConnectionFlags: mobyipvs.ConnectionFlagMasq, UpperThreshold: 9, LowerThreshold: 2}
	if err := h.NewDestination(ms, md); err != nil {
		t.Fatalf("moby NewDestination: %v", err)
	}
	if err := h.SetConfig(&mobyipvs.Config{TimeoutTCP: 11 * time.Second, TimeoutUDP: 22 * time.Second}); err != nil {
		t.Fatalf("moby SetConfig: %v", err)
	}

	want4 := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.0.0.9"), Port: 8080,
		Scheduler: "lc", Flags: ipvs.FlagPersistent, Timeout: 120, Netmask: 0xffff0000}
	want6 := ipvs.Service{Family: ipvs.AFInet6, FWMark: 77, Scheduler: "rr", Netmask: 128}
	got, err := c.Services()
	if err != nil {
		t.Fatalf("Services: %v", err)
	}
	slices.SortFunc(got, func(a, b ipvs.ServiceEntry) int { return int(a.Family) - int(b.Family) })
	if !slices.Equal(got, []ipvs.ServiceEntry{{Service: want4}, {Service: want6}}) {
		t.Errorf("Services:\n got  %+v\n want %+v", got, []ipvs.Service{want4, want6})
	}
	d, err := c.Destinations(want4)
	wantD := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.MustParseAddr("192.168.7.7"), Port: 80, FwdMethod: ipvs.FwdMasq, Weight: 12, UThreshold: 9, LThreshold: 2}
	if err != nil || !slices.Equal(d, []ipvs.DestinationEntry{{Destination: wantD}}) {
		t.Errorf("Destinations: %+v, %v; want [%+v]", d, err, wantD)
	}
	tm, err := c.Timeouts()
	if err != nil || tm != (ipvs.Timeouts{TCP: 11, TCPFin: 120, UDP: 22}) {
		t.Errorf("Timeouts: %+v, %v; want {11 120 22}", tm, err)
	}
}

// hostOrder converts a big-endian-numbered IPv4 mask to the value moby/ipvs
// writes and reads: it treats the attribute as a host-order integer.
func hostOrder(v uint32) uint32 {
	if isLittleEndian() {
		return bits.ReverseBytes32(v)
	}
	return v
}

func isLittleEndian() bool { return binary.NativeEndian.Uint16([]byte{1, 0}) == 1 }

func mobyService(s *ipvs.Service) *mobyipvs.Service {
	m := &mobyipvs.Service{AddressFamily: uint16(s.Family), Protocol: uint16(s.Protocol), Port: s.Port, FWMark: s.FWMark,
		SchedName: s.Scheduler, Flags: uint32(s.Flags), Timeout: s.Timeout, Netmask: s.Netmask}
	if s.Family == ipvs.AFInet {
		m.Netmask = hostOrder(s.Netmask)
	}
	if s.Addr.IsValid() {
		m.Address = net.IP(s.Addr.AsSlice())
	}
	return m
}

func mustExec(t testing.TB, c ipvs.Client, r ipvs.Request) {
	t.Helper()
	if err := c.Exec(r); err != nil {
		t.Fatalf("Exec %s: %v", r.Cmd, err)
	}
}

// ---- the fake against the kernel, step by step ------------------------------

// TestFakeMatchesKernelStepByStep drives the fake and the kernel with the
// same long pseudo-random sequence of requests (most of them valid, many
// not) and demands the same answer to every request and the same tables
// at the end.
func TestFakeMatchesKernelStepByStep(t *testing.T) {
	c := openInNetns(t)
	f := ipvstest.New()
	rng := rand.New(rand.NewPCG(1, 2))
	services := []ipvs.Service{
		{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 80},
		{Family: ipvs.AFInet, Protocol: ipvs.ProtoUDP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 80},
		{Family: ipvs.AFInet6, Protocol: ipvs.ProtoSCTP, Addr: netip.MustParseAddr("2001:db8::1"), Port: 80},
		{Family: ipvs.AFInet, FWMark: 1},
		{Family: ipvs.AFInet6, FWMark: 1},
	}
	addrs := []string{"192.168.0.1", "192.168.0.2", "2001:db8::7", "127.0.0.1", "0.0.0.0", "224.1.1.1", "::1", "fe80::1"}
	scheds := []string{"rr", "wlc", "sh", "mh", "none", "nosuch"}
	for step := range 1500 {
		var r ipvs.Request
		s := services[rng.IntN(len(services))]
		s.Scheduler = scheds[rng.IntN(len(scheds))]
		s.Netmask = 0xffffffff
		if s.Family == ipvs.AFInet6 {
			s.Netmask = []uint32{128, 64, 0}[rng.IntN(3)]
		}
		if rng.IntN(4) == 0 {
			s.Flags, s.Timeout = ipvs.FlagPersistent, uint32(rng.IntN(1000))
		}
		if rng.IntN(8) == 0 {
			s.PEName = []string{"sip", "nosuch"}[rng.IntN(2)]
		}
		a := netip.MustParseAddr(addrs[rng.IntN(len(addrs))])
		d := ipvs.Destination{Family: ipvs.AFInet, Addr: a, Port: uint16(rng.IntN(3)), FwdMethod: ipvs.FwdMethod(rng.IntN(4)),
			Weight: uint32(rng.IntN(5)), UThreshold: uint32(rng.IntN(4)), LThreshold: uint32(rng.IntN(3))}
		if a.Is6() {
			d.Family = ipvs.AFInet6
		}
		if rng.IntN(5) == 0 {
			d.TunType, d.TunPort, d.TunFlags = ipvs.TunType(rng.IntN(3)), uint16(rng.IntN(2)*6080), ipvs.TunFlags(rng.IntN(3))
		}
		switch k := rng.IntN(20); {
		case k < 5:
			r = ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}
		case k < 7:
			r = ipvs.Request{Cmd: ipvs.CmdSetService, Service: &s}
		case k < 8:
			r = ipvs.Request{Cmd: ipvs.CmdDelService, Service: &s}
		case k < 13:
			r = ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d}
		case k < 15:
			r = ipvs.Request{Cmd: ipvs.CmdSetDest, Service: &s, Dest: &d}
		case k < 16:
			r = ipvs.Request{Cmd: ipvs.CmdDelDest, Service: &s, Dest: &d}
		case k < 17:
			r = ipvs.Request{Cmd: ipvs.CmdZero, Service: &s}
		case k < 18:
			dm := ipvs.Daemon{State: ipvs.DaemonState(1 + rng.IntN(2)), Interface: []string{"lo", "eth0"}[rng.IntN(2)], SyncID: uint32(rng.IntN(3))}
			r = ipvs.Request{Cmd: []ipvs.Op{ipvs.CmdNewDaemon, ipvs.CmdDelDaemon}[rng.IntN(2)], Daemon: &dm}
		case k < 19:
			r = ipvs.Request{Cmd: ipvs.CmdSetConfig, Timeouts: &ipvs.Timeouts{TCP: uint32(rng.IntN(3)), UDP: uint32(rng.IntN(2) * 9000000)}}
		default:
			if rng.IntN(50) == 0 {
				r = ipvs.Request{Cmd: ipvs.CmdFlush}
			} else {
				r = ipvs.Request{Cmd: ipvs.CmdZero}
			}
		}
		ek, ef := c.Exec(r), f.Exec(r)
		if r.Cmd == ipvs.CmdDelDaemon && ef == nil && errors.Is(ek, ipvs.ErrNoAnswer) {
			// The kernel stopped a daemon whose thread had not run yet and
			// swallowed its answer; the fake has no threads to race with.
			continue
		}
		if errnoOf(ek) != errnoOf(ef) { // errnoOf: kernel_test.go
			t.Fatalf("step %d %s: kernel %v, fake %v\nservice %+v\ndest %+v", step, r.Cmd, ek, ef, r.Service, r.Dest)
		}
	}
	compareTables(t, c, f)
}

func compareTables(t *testing.T, k, f ipvs.Client) {
	t.Helper()
	ks, err := k.Services()
	if err != nil {
		t.Fatalf("kernel Services: %v", err)
	}
	fs, err := f.Services()
	if err != nil {
		t.Fatalf("fake Services: %v", err)
	}
	key := func(s ipvs.Service) string {
		return fmt.Sprintf("%d/%d/%d/%s/%d", s.Family, s.FWMark, s.Protocol, s.Addr, s.Port)
	}
	byKey := func(l []ipvs.ServiceEntry) []ipvs.ServiceEntry {
		l = slices.Clone(l)
		slices.SortFunc(l, func(a, b ipvs.ServiceEntry) int { return strings.Compare(key(a.Service), key(b.Service)) })
		return l
	}
	if !slices.Equal(byKey(ks), byKey(fs)) {
		t.Errorf("services differ:\n kernel %+v\n fake   %+v", byKey(ks), byKey(fs))
	}
	for _, s := range ks {
		kd, err1 := k.Destinations(s.Service)
		fd, err2 := f.Destinations(s.Service)
		if err1 != nil || err2 != nil || !slices.Equal(kd, fd) {
			t.Errorf("destinations of %s differ:\n kernel %+v (%v)\n fake   %+v (%v)", key(s.Service), kd, err1, fd, err2)
		}
	}
	kt, _ := k.Timeouts()
	ft, _ := f.Timeouts()
	if kt != ft {
		t.Errorf("timeouts: kernel %+v, fake %+v", kt, ft)
	}
	kdm, _ := k.Daemons()
	fdm, _ := f.Daemons()
	if !slices.Equal(kdm, fdm) {
		t.Errorf("daemons:\n kernel %+v\n fake   %+v", kdm, fdm)
	}
	t.Logf("compared %d services, timeouts %+v, %d daemons", len(ks), kt, len(kdm))
}

// ---- speed -----------------------------------------------------------------

// BenchmarkList1000x10 lists a table of 1000 services with 10 destinations
// each: one service dump and 1000 destination dumps per iteration.
func BenchmarkList1000x10(b *testing.B) {
	c := openInNetns(b)
	fill(b, c, 1000, 10, 256)
	b.ReportAllocs()
	for b.Loop() {
		svcs, err := c.Services()
		if err != nil || len(svcs) != 1000 {
			b.Fatalf("Services: %d, %v", len(svcs), err)
		}
		n := 0
		for _, s := range svcs {
			d, err := c.Destinations(s.Service)
			if err != nil {
				b.Fatal(err)
			}
			n += len(d)
		}
		if n != 10000 {
			b.Fatalf("%d destinations", n)
		}
	}
}

// BenchmarkPipelinedAdd adds one service and ten destinations per
// iteration through a pipeline (window 256), as a restore would.
func BenchmarkPipelinedAdd(b *testing.B) {
	c := openInNetns(b)
	b.ReportAllocs()
	b.ResetTimer()
	fill(b, c, b.N, 10, 256)
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*11), "ns/request")
}

// BenchmarkExecAdd is the same without a pipeline: one round trip each.
func BenchmarkExecAdd(b *testing.B) {
	c := openInNetns(b)
	b.ReportAllocs()
	b.ResetTimer()
	fill(b, c, b.N, 10, 0)
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*11), "ns/request")
}

// fill adds n services with k destinations each; window 0 means Exec.
func fill(b testing.TB, c ipvs.Client, n, k, window int) {
	b.Helper()
	var p ipvs.Pipeline
	if window > 0 {
		p = c.Pipeline(window)
	}
	failed := 0
	do := func(r ipvs.Request) {
		if p == nil {
			if c.Exec(r) != nil {
				failed++
			}
			return
		}
		if err := p.Submit(r, func(err error) {
			if err != nil {
				failed++
			}
		}); err != nil {
			b.Fatalf("Submit: %v", err)
		}
	}
	for i := range n {
		s := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}),
			Port: 80, Scheduler: "wlc", Netmask: 0xffffffff}
		do(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s})
		for j := range k {
			d := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.AddrFrom4([4]byte{192, 168, byte(j), 1}), Port: 80, FwdMethod: ipvs.FwdRoute, Weight: 1}
			do(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d})
		}
	}
	if p != nil {
		if err := p.Flush(); err != nil {
			b.Fatalf("Flush: %v", err)
		}
	}
	if failed > 0 {
		b.Fatalf("%d requests failed", failed)
	}
}

// TestLargeServiceListsWhole: on the kernel, destination dumps start on
// Open's second socket (page-sized datagrams) and a service too large
// for it is read again over the main one, as is every later service. A
// table of small, large and small services lists whole, each service's
// destinations exactly those added, and as Debian's ipvsadm lists them.
func TestLargeServiceListsWhole(t *testing.T) {
	c := openInNetns(t)
	sizes := []int{10, 2000, 10, 1}
	p := c.Pipeline(256)
	var svcs []ipvs.Service
	want := map[int]map[netip.Addr]bool{}
	for i, n := range sizes {
		s := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.AddrFrom4([4]byte{10, 1, 0, byte(i + 1)}), Port: 80, Scheduler: "wlc", Netmask: 0xffffffff}
		p.Submit(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}, nil)
		want[i] = map[netip.Addr]bool{}
		for j := range n {
			a := netip.AddrFrom4([4]byte{192, 168, byte(j >> 8), byte(j)})
			d := ipvs.Destination{Family: ipvs.AFInet, Addr: a, Port: 80, Weight: 1, FwdMethod: ipvs.FwdMasq}
			p.Submit(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d}, nil)
			want[i][a] = true
		}
		svcs = append(svcs, s)
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for i, s := range svcs {
		ds, err := c.Destinations(s)
		if err != nil {
			t.Fatalf("service %d: %v", i, err)
		}
		got := map[netip.Addr]bool{}
		for _, d := range ds {
			got[d.Addr] = true
		}
		if len(ds) != sizes[i] || len(got) != sizes[i] || !maps.Equal(got, want[i]) {
			t.Fatalf("service %d: %d destinations (%d distinct), want the %d added", i, len(ds), len(got), sizes[i])
		}
		total += len(ds)
	}
	res := labtest.Run(t, "", labtest.RefIpvsadm, "-Sn")
	if res.Code != 0 {
		t.Fatalf("%s -Sn: %+v", labtest.RefIpvsadm, res)
	}
	if n := strings.Count(res.Stdout, "\n-a "); n != total {
		t.Errorf("Debian's ipvsadm lists %d destinations, we listed %d", n, total)
	}
}

// TestConformanceKernelLegacyReads runs the shared suite against the
// running kernel with SkipStats on, so that IPv4 services' destinations
// are read with the kernel's getsockopt interface wherever its answer is
// complete (the suite's tunnels and mixed families go over netlink).
func TestConformanceKernelLegacyReads(t *testing.T) {
	conformance.Run(t, func(t *testing.T) ipvs.Client {
		c := openInNetns(t)
		ipvs.SkipStats(c, true)
		return c
	})
}

// TestLegacyReadsEqualDumpsOnTheKernel: on a table of every kind of
// service and server, each service's destinations read with the legacy
// interface equal those of a GET_DEST dump, and exactly the services
// whose legacy answer is complete (IPv4, no tunnelled server, no server
// of the other family) were read that way.
func TestLegacyReadsEqualDumpsOnTheKernel(t *testing.T) {
	c, dumps := openLegacyAndDumps(t)
	v4, dest := v4Service, destination
	thresholds := dest("192.168.1.3", 8080, ipvs.FwdMasq, 3)
	thresholds.UThreshold, thresholds.LThreshold = 100, 50
	gue := dest("192.168.5.1", 80, ipvs.FwdTunnel, 1)
	gue.TunType, gue.TunPort = ipvs.TunGUE, 6080
	persistent := v4(ipvs.ProtoUDP, "10.0.0.6", 5060)
	persistent.Flags, persistent.Timeout = 1, 300 // IP_VS_SVC_F_PERSISTENT
	type svcCase struct {
		s        ipvs.Service
		ds       []ipvs.Destination
		viaProbe bool
	}
	big := svcCase{s: v4(ipvs.ProtoTCP, "10.0.0.7", 80), viaProbe: true}
	for j := range 700 {
		big.ds = append(big.ds, dest(fmt.Sprintf("192.168.%d.%d", 100+j/250, j%250+1), 80, ipvs.FwdRoute, uint32(j)))
	}
	cases := []svcCase{
		{v4(ipvs.ProtoTCP, "10.0.0.1", 80), []ipvs.Destination{dest("192.168.1.1", 80, ipvs.FwdMasq, 1), dest("192.168.1.2", 80, ipvs.FwdRoute, 0), thresholds}, true},
		{v4(ipvs.ProtoUDP, "10.0.0.1", 53), []ipvs.Destination{dest("192.168.2.1", 53, ipvs.FwdMasq, 2147483647)}, true},
		{ipvs.Service{Family: ipvs.AFInet, FWMark: 7, Scheduler: "rr", Netmask: 0xffffffff}, []ipvs.Destination{dest("192.168.3.1", 0, ipvs.FwdRoute, 1)}, true},
		{v4(ipvs.ProtoSCTP, "10.0.0.3", 5060), nil, true},
		{persistent, []ipvs.Destination{dest("192.168.6.1", 5060, ipvs.FwdMasq, 1)}, true},
		{v4(ipvs.ProtoTCP, "10.0.0.4", 80), []ipvs.Destination{dest("192.168.4.1", 80, ipvs.FwdMasq, 1), dest("2001:db8:4::1", 80, ipvs.FwdTunnel, 1)}, false},
		{v4(ipvs.ProtoTCP, "10.0.0.5", 80), []ipvs.Destination{dest("192.168.5.2", 80, ipvs.FwdRoute, 1), gue}, false},
		{ipvs.Service{Family: ipvs.AFInet6, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("2001:db8::1"), Port: 443, Scheduler: "wlc", Netmask: 128},
			[]ipvs.Destination{dest("2001:db8:6::1", 443, ipvs.FwdMasq, 1), dest("10.9.9.9", 443, ipvs.FwdTunnel, 1)}, false},
		{ipvs.Service{Family: ipvs.AFInet6, FWMark: 7, Scheduler: "rr", Netmask: 128}, nil, false},
		big,
	}
	for _, sc := range cases {
		mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdNewService, Service: &sc.s})
		for i := range sc.ds {
			mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &sc.s, Dest: &sc.ds[i]})
		}
	}
	for _, sc := range cases {
		before, _ := ipvs.LegacyReadsForTest(c)
		got, err := ipvs.AppendDestinations(c, nil, &sc.s)
		if err != nil {
			t.Fatalf("%v: %v", sc.s, err)
		}
		want, err := ipvs.AppendDestinations(dumps, nil, &sc.s)
		if err != nil {
			t.Fatal(err)
		}
		// Tunnel settings of servers that are not tunnelled are the one
		// thing the legacy interface does not report; the kernel keeps
		// them zero for servers added without them, as all of these were.
		if !slices.Equal(got, want) || len(got) != len(sc.ds) {
			t.Errorf("%v: legacy read %d servers, dump %d, added %d:\n legacy %+v\n dump   %+v", sc.s, len(got), len(want), len(sc.ds), clipList(got), clipList(want))
		}
		after, enabled := ipvs.LegacyReadsForTest(c)
		if read := after > before; read != sc.viaProbe || !enabled {
			t.Errorf("%v: read with the legacy interface: %v, want %v (still enabled: %v)", sc.s, read, sc.viaProbe, enabled)
		}
	}
}

// openLegacyAndDumps opens, in a fresh namespace, a Conn that reads with
// the legacy interface and one that reads over netlink alone, both without
// counters.
func openLegacyAndDumps(t *testing.T) (c, dumps *ipvs.Conn) {
	t.Helper()
	c = openInNetns(t)
	dumps, err := ipvs.Open() // same namespace: the test's thread is in it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dumps.Close() })
	ipvs.UseLegacyForTest(dumps, nil)
	ipvs.SkipStats(c, true)
	ipvs.SkipStats(dumps, true)
	return c, dumps
}

func clipList(ds []ipvs.DestinationEntry) []ipvs.DestinationEntry {
	return ds[:min(len(ds), 4)]
}

// TestSnapshotServiceKeysOnTheKernel: on a table of IPv4 services large
// enough that its dump takes several datagrams, the legacy snapshot lists
// the same keys in the same order; an IPv6 service is not in it.
func TestSnapshotServiceKeysOnTheKernel(t *testing.T) {
	c := openInNetns(t)
	p := c.Pipeline(256)
	for i := range 600 {
		s := v4Service(ipvs.ProtoTCP, fmt.Sprintf("10.2.%d.%d", i/250, i%250+1), 80)
		if i%7 == 0 {
			s = ipvs.Service{Family: ipvs.AFInet, FWMark: uint32(i + 1), Scheduler: "rr", Netmask: 0xffffffff}
		}
		p.Submit(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}, nil)
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	svcs, err := c.Services()
	if err != nil {
		t.Fatal(err)
	}
	if n := c.ReplyDatagrams(); n < 2 {
		t.Fatalf("the dump of %d services took %d datagram(s); the test needs several", len(svcs), n)
	}
	keys, ok := c.SnapshotServiceKeys(nil)
	if !ok || len(keys) != len(svcs) {
		t.Fatalf("snapshot: %d keys (%v), dump %d services", len(keys), ok, len(svcs))
	}
	for i := range svcs {
		d, k := svcs[i].Service, keys[i]
		if d.FWMark != k.FWMark || d.FWMark == 0 && (d.Protocol != k.Protocol || d.Addr != k.Addr || d.Port != k.Port) {
			t.Fatalf("key %d: snapshot %+v, dump %+v", i, k, d)
		}
	}
	six := ipvs.Service{Family: ipvs.AFInet6, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("2001:db8::1"), Port: 80, Scheduler: "wlc", Netmask: 128}
	mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdNewService, Service: &six})
	if keys, ok := c.SnapshotServiceKeys(nil); !ok || len(keys) != len(svcs) {
		t.Errorf("with an IPv6 service added: a snapshot of %d keys (%v), want the %d IPv4 ones", len(keys), ok, len(svcs))
	}
}

// TestLegacyChainsMatchTheKernel: the kernel lists services (in a dump,
// or a legacy snapshot) walking its hash table bucket by bucket, so the chains EachDestinations infers
// (ipvs.LegacyChainForTest) must come in runs, in one order of buckets
// that is the inferred chain mixed with one constant for the namespace:
// a wrong hash (another mix of address, port and protocol) breaks the
// runs.
func TestLegacyChainsMatchTheKernel(t *testing.T) {
	c := openInNetns(t)
	r := rand.New(rand.NewPCG(13, 5))
	protos := []ipvs.Protocol{ipvs.ProtoTCP, ipvs.ProtoUDP, ipvs.ProtoSCTP}
	refused := map[string]int{}
	p := c.Pipeline(256)
	for i := range 2000 {
		s := ipvs.Service{Family: ipvs.AFInet, Protocol: protos[r.IntN(3)], Scheduler: "rr", Netmask: 0xffffffff,
			Addr: netip.AddrFrom4([4]byte{10, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}), Port: uint16(r.IntN(65535) + 1)}
		if i%10 == 0 {
			s = ipvs.Service{Family: ipvs.AFInet, FWMark: r.Uint32N(1<<20) + 1, Scheduler: "rr", Netmask: 0xffffffff}
		}
		p.Submit(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}, func(err error) {
			if err != nil {
				refused[err.Error()]++ // a duplicate: fine
			}
		})
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Logf("refused: %v", refused)
	// The legacy snapshot lists the table in the dump's order, in one
	// copy: a dump resumed between datagrams skips services when another
	// namespace's are deleted meanwhile (decision 0007).
	svcs, ok := c.SnapshotServiceKeys(nil)
	if !ok {
		t.Fatal("no snapshot of the services")
	}
	var chains []int
	for _, s := range svcs {
		h, ok := ipvs.LegacyChainForTest(&s)
		if !ok {
			t.Fatalf("%+v: no chain", s)
		}
		chains = append(chains, h)
	}
	for mix := range 256 {
		ordered := true
		for i := 1; i < len(chains) && ordered; i++ {
			a, b := chains[i-1], chains[i]
			ordered = a&256 < b&256 || a&256 == b&256 && a^mix <= b^mix
		}
		if ordered {
			t.Logf("%d services in the kernel's order of inferred chains, mixed with %#x", len(svcs), mix)
			return
		}
	}
	t.Errorf("no constant orders the inferred chains of %d services as the kernel's dump lists them: %v", len(svcs), chains[:min(len(chains), 40)])
}

// TestBatchedReadsOnTheKernel: in a table where 1,100 services share one
// hash chain, EachDestinations reads what GET_DEST dumps list, with the
// legacy interface for all but the services it cannot read whole (a
// tunnelled server, an IPv6 server), in batches: counts in bulk, not one
// a service.
func TestBatchedReadsOnTheKernel(t *testing.T) {
	c, dumps := openLegacyAndDumps(t)
	svcs, notLegacy := batchTable(t, c, func(i int) string { return fmt.Sprintf("10.%d.%d.7", i/250, i%250) })
	readInBatches(t, c, dumps, svcs, notLegacy)
	batches := (len(svcs) + ipvs.LegacyBatchLen - 1) / ipvs.LegacyBatchLen
	if n := ipvs.LegacyBulkCountsForTest(c); n != batches+1 {
		t.Errorf("%d counts in bulk, want %d (one before the first batch, one after each)", n, batches+1)
	}
}

// TestReadsByChainOnTheKernel: in a table of 1,100 services over 200
// short hash chains, one of them with 700 servers (more than the first
// answer has room for), EachDestinations reads chain by chain what
// GET_DEST dumps list, with the legacy interface for all but the
// services it cannot read whole, and no counts in bulk.
func TestReadsByChainOnTheKernel(t *testing.T) {
	c, dumps := openLegacyAndDumps(t)
	svcs, notLegacy := batchTable(t, c, func(i int) string { return fmt.Sprintf("10.%d.%d.%d", i/200/250, i/200%250, i%200+1) })
	big := svcs[500]
	for j := range 700 {
		d := destination(fmt.Sprintf("192.168.%d.%d", 100+j/250, j%250+1), 80, ipvs.FwdRoute, uint32(j))
		mustExec(t, c, ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &big, Dest: &d})
	}
	readInBatches(t, c, dumps, svcs, notLegacy)
	if n := ipvs.LegacyBulkCountsForTest(c); n != 0 {
		t.Errorf("%d counts in bulk for chains of 5 or 6 services", n)
	}
}

// batchTable adds 1,100 TCP services on port 80 at addr(i), service i
// with i%5 servers, one of which is an IPv6 one (i%50 == 1) or tunnelled
// (i%50 == 2), and returns them with the number of such services, which
// the legacy interface cannot read whole.
func batchTable(t *testing.T, c *ipvs.Conn, addr func(i int) string) (svcs []ipvs.Service, notLegacy int) {
	t.Helper()
	p := c.Pipeline(256)
	for i := range 1100 {
		s := v4Service(ipvs.ProtoTCP, addr(i), 80)
		p.Submit(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}, nil)
		for j := range i % 5 {
			d := destination(fmt.Sprintf("192.168.%d.%d", j, i%250+1), 8080, ipvs.FwdRoute, uint32(j))
			switch {
			case i%50 == 1 && j == 0:
				d = destination(fmt.Sprintf("2001:db8::%x", i), 8080, ipvs.FwdTunnel, 1)
				notLegacy++
			case i%50 == 2 && j == 0:
				d.FwdMethod = ipvs.FwdTunnel
				notLegacy++
			}
			p.Submit(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d}, nil)
		}
		svcs = append(svcs, s)
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	return svcs, notLegacy
}

// readInBatches reads the kernel's services with EachDestinations, in
// another order than its chains', and checks them against dumps and that
// all but notLegacy were read with the legacy interface.
func readInBatches(t *testing.T, c, dumps *ipvs.Conn, svcs []ipvs.Service, notLegacy int) {
	t.Helper()
	read, ok := c.SnapshotServiceKeys(nil) // not a dump: see TestLegacyChainsMatchTheKernel
	if !ok || len(read) != len(svcs) {
		t.Fatalf("%d services in the kernel, want %d", len(read), len(svcs))
	}
	// Another order than the chains': a listing's, sorted by address.
	slices.SortFunc(read, func(a, b ipvs.Service) int { return a.Addr.Compare(b.Addr) })
	eachDestinations(t, c, dumps, read)
	if n, enabled := ipvs.LegacyReadsForTest(c); n != len(svcs)-notLegacy || !enabled {
		t.Errorf("%d services read with the legacy interface (enabled: %v), want %d", n, enabled, len(svcs)-notLegacy)
	}
}
