package health

import (
	"context"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inNetns runs f on a thread of its own in a new network namespace, its
// loopback up; the thread ends with f. Skipped without the privilege.
func inNetns(t *testing.T, f func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: a network namespace of its own")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Errorf("socket: %v", err)
			return
		}
		defer unix.Close(fd)
		ifr, err := unix.NewIfreq("lo")
		if err == nil {
			err = unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr)
		}
		if err == nil {
			ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
			err = unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
		}
		if err != nil {
			t.Errorf("lo up: %v", err)
			return
		}
		f()
	}()
	<-done
}

// sysctl sets a sysctl of the calling thread's network namespace.
func sysctl(t *testing.T, name, value string) {
	t.Helper()
	if err := os.WriteFile("/proc/sys/"+name, []byte(value+"\n"), 0o644); err != nil {
		t.Errorf("sysctl %s: %v", name, err)
	}
}

// socketKinds records the kinds of ICMP socket the probes ask for
// (SOCK_DGRAM, SOCK_RAW), and may refuse some.
type socketKinds struct {
	mu     sync.Mutex
	asked  []int
	refuse map[int]error
}

func (k *socketKinds) install(t *testing.T) {
	old := icmpSocketCall
	t.Cleanup(func() { icmpSocketCall = old; icmpRaw[0].Store(false); icmpRaw[1].Store(false) })
	icmpRaw[0].Store(false)
	icmpRaw[1].Store(false)
	icmpSocketCall = func(domain, typ, proto int) (int, error) {
		k.mu.Lock()
		k.asked = append(k.asked, typ)
		err := k.refuse[typ]
		k.mu.Unlock()
		if err != nil {
			return -1, err
		}
		return old(domain, typ, proto)
	}
}

func (k *socketKinds) take() []int {
	k.mu.Lock()
	defer k.mu.Unlock()
	a := k.asked
	k.asked = nil
	return a
}

func kindsEqual(a []int, b ...int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestProbePing: in a namespace of its own, where the kernel's default
// ping_group_range admits no group, a ping of each loopback address goes
// by a raw socket once a datagram socket is refused, and passes; with
// echo requests ignored it times out; an address without a route fails
// at once. With the range widened, a datagram socket serves.
func TestProbePing(t *testing.T) {
	ping := Spec{Type: "ping", Interval: "1s", Timeout: "200ms"}
	var kinds socketKinds
	kinds.install(t)
	inNetns(t, func() {
		for _, a := range []string{"127.0.0.1", "::1"} {
			addr := netip.AddrPortFrom(netip.MustParseAddr(a), 80)
			wantPass(t, "ping "+a, probe(t, addr, ping))
			if got := kinds.take(); !kindsEqual(got, unix.SOCK_DGRAM, unix.SOCK_RAW) {
				t.Errorf("ping %s asked for sockets %v, want a datagram one, then a raw one", a, got)
			}
			wantPass(t, "ping "+a+" again", probe(t, addr, ping))
			if got := kinds.take(); !kindsEqual(got, unix.SOCK_RAW) {
				t.Errorf("ping %s again asked for sockets %v, want a raw one only", a, got)
			}
		}
		// Raw sockets see every reply of the address: each probe must
		// find its own among the others'.
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				wantPass(t, "one of 20 pings at once", probe(t, netip.MustParseAddrPort("127.0.0.1:0"), ping))
			})
		}
		wg.Wait()
		kinds.take()
		wantFail(t, "ping without a route", probe(t, netip.MustParseAddrPort("192.0.2.1:80"), ping),
			"ping 192.0.2.1: network is unreachable")
		sysctl(t, "net/ipv4/icmp_echo_ignore_all", "1")
		sysctl(t, "net/ipv6/icmp/echo_ignore_all", "1")
		for _, a := range []string{"127.0.0.1:80", "[::1]:80"} {
			wantFail(t, "ping "+a+" ignored", probe(t, netip.MustParseAddrPort(a), ping), "timeout after 200ms")
		}
		// A cancelled context is no timeout.
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		if err := Probe(ctx, Target{Addr: netip.MustParseAddrPort("127.0.0.1:80"), Spec: Spec{Type: "ping", Interval: "20s", Timeout: "10s"}}); err != context.Canceled {
			t.Errorf("cancelled ping: %v, want context.Canceled", err)
		}
		sysctl(t, "net/ipv4/icmp_echo_ignore_all", "0")
		sysctl(t, "net/ipv6/icmp/echo_ignore_all", "0")

		// Any group may ping: the raw probes try a datagram socket again
		// once a raw one is refused, and keep to it.
		sysctl(t, "net/ipv4/ping_group_range", "0 2147483647")
		kinds.take()
		kinds.mu.Lock()
		kinds.refuse = map[int]error{unix.SOCK_RAW: unix.EPERM}
		kinds.mu.Unlock()
		for _, a := range []string{"127.0.0.1", "::1"} {
			addr := netip.AddrPortFrom(netip.MustParseAddr(a), 80)
			wantPass(t, "datagram ping "+a, probe(t, addr, ping))
			if got := kinds.take(); !kindsEqual(got, unix.SOCK_RAW, unix.SOCK_DGRAM) {
				t.Errorf("ping %s without CAP_NET_RAW asked for sockets %v, want a raw one, then a datagram one", a, got)
			}
			wantPass(t, "datagram ping "+a+" again", probe(t, addr, ping))
			if got := kinds.take(); !kindsEqual(got, unix.SOCK_DGRAM) {
				t.Errorf("ping %s again asked for sockets %v, want a datagram one only", a, got)
			}
		}
		sysctl(t, "net/ipv4/icmp_echo_ignore_all", "1")
		wantFail(t, "datagram ping ignored", probe(t, netip.MustParseAddrPort("127.0.0.1:80"), ping), "timeout after 200ms")
	})
}

// TestProbePingNoSocket: with neither kind of ICMP socket allowed, a ping
// says why.
func TestProbePingNoSocket(t *testing.T) {
	kinds := socketKinds{refuse: map[int]error{unix.SOCK_DGRAM: unix.EACCES, unix.SOCK_RAW: unix.EPERM}}
	kinds.install(t)
	for _, a := range []string{"127.0.0.1", "::1"} {
		wantFail(t, "ping "+a, probe(t, netip.AddrPortFrom(netip.MustParseAddr(a), 80), Spec{Type: "ping"}),
			"ping "+a+": no ICMP socket: the process's groups are outside net.ipv4.ping_group_range (for a datagram socket) and it lacks CAP_NET_RAW (for a raw one)")
	}
	kinds.take()
	kinds.mu.Lock()
	kinds.refuse = map[int]error{unix.SOCK_DGRAM: unix.EAFNOSUPPORT}
	kinds.mu.Unlock()
	icmpRaw[1].Store(false)
	wantFail(t, "ping without IPv6", probe(t, netip.MustParseAddrPort("[::1]:80"), Spec{Type: "ping"}),
		"ping ::1: address family not supported by protocol")
}
