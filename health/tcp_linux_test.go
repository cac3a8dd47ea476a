package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// blackhole returns an address of host where connects stay in progress: a
// listener with a backlog of 0 that never accepts, whose one queued
// connection fills it, so that the kernel drops further SYNs.
func blackhole(t *testing.T, host string) netip.AddrPort {
	t.Helper()
	addr, _ := blackholeListener(t, host)
	return addr
}

// blackholeListener is blackhole with its listening socket, whose one
// accept makes room for one more connection.
func blackholeListener(t *testing.T, host string) (netip.AddrPort, int) {
	t.Helper()
	family, sa, err := tcpSockaddr(netip.AddrPortFrom(netip.MustParseAddr(host), 0))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(ln) })
	if err := unix.Bind(ln, sa); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(ln, 0); err != nil {
		t.Fatal(err)
	}
	name, err := unix.Getsockname(ln)
	if err != nil {
		t.Fatal(err)
	}
	var addr netip.AddrPort
	switch a := name.(type) {
	case *unix.SockaddrInet4:
		addr = netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		addr = netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
	}
	for range 8 {
		fd := rawConnect(t, addr)
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		if n, err := unix.Poll(pfd, 200); err == nil && n == 0 {
			unix.Close(fd) // its SYN would take the room an accept makes
			return addr, ln
		}
		t.Cleanup(func() { unix.Close(fd) }) // queued: fills the listener
	}
	t.Fatalf("%s: every connect to a full listener completed", addr)
	return addr, ln
}

// rawConnect starts a connect to addr on a non-blocking socket.
func rawConnect(t testing.TB, addr netip.AddrPort) int {
	family, sa, err := tcpSockaddr(addr)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Reset at close: no TIME_WAIT left.
	if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Connect(fd, sa); err != nil && err != unix.EINPROGRESS {
		unix.Close(fd)
		t.Fatalf("connect %s: %v", addr, err)
	}
	return fd
}

// onPoller is how many connects wait on the shared poller.
func onPoller() int {
	connWait.mu.Lock()
	defer connWait.mu.Unlock()
	return len(connWait.waiters)
}

// waitOnPoller polls until n connects wait on the shared poller (10 s at
// most: a bound on a hung test).
func waitOnPoller(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := onPoller()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connects wait on the shared poller after 10 s, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestProbeTCPTimeout: a connect that never completes fails the probe at
// its timeout; a cancelled context is no timeout. Real clock: real sockets.
func TestProbeTCPTimeout(t *testing.T) {
	for _, host := range loopbacks {
		addr := blackhole(t, host)
		wantFail(t, "tcp blackhole "+addr.String(), probe(t, addr, Spec{Type: "tcp", Interval: "1s", Timeout: "200ms"}),
			"timeout after 200ms")

		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		err := Probe(ctx, Target{Addr: addr, Spec: Spec{Type: "tcp", Interval: "20s", Timeout: "10s"}})
		if err != context.Canceled {
			t.Errorf("cancelled probe of %s: %v, want context.Canceled", addr, err)
		}
		cancel()
		if err := Probe(ctx, Target{Addr: listenTCP(t, host), Spec: Spec{Type: "tcp"}}); err != context.Canceled {
			t.Errorf("probe with a cancelled context: %v, want context.Canceled", err)
		}
	}
}

// TestProbeTCPLateConnect: a connect that completes after connect
// returned, when the SYN is sent again, passes on the shared poller's
// event. Real clock: real sockets, and the kernel's SYN retransmission.
func TestProbeTCPLateConnect(t *testing.T) {
	addr, ln := blackholeListener(t, "127.0.0.1")
	done := make(chan error, 1)
	waiting := onPoller()
	go func() { done <- probe(t, addr, Spec{Type: "tcp", Interval: "20s", Timeout: "10s"}) }()
	waitOnPoller(t, waiting+1)
	select {
	case err := <-done:
		t.Fatalf("the probe ended before the listener made room: %v", err)
	default:
	}
	c, _, err := unix.Accept(ln) // room for the probe's next SYN
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(c)
	wantPass(t, "tcp "+addr.String()+" after an accept", <-done)
}

// TestProbeTCPMapped: an IPv4-mapped address is probed over IPv4 and
// named as given.
func TestProbeTCPMapped(t *testing.T) {
	up := listenTCP(t, "127.0.0.1")
	mapped := netip.AddrPortFrom(netip.AddrFrom16(up.Addr().As16()), up.Port())
	wantPass(t, "tcp "+mapped.String(), probe(t, mapped, Spec{Type: "tcp"}))
	down := closedPort(t, "tcp", "127.0.0.1")
	mapped = netip.AddrPortFrom(netip.AddrFrom16(down.Addr().As16()), down.Port())
	wantFail(t, "tcp "+mapped.String(), probe(t, mapped, Spec{Type: "tcp"}),
		"connect "+mapped.String()+": connection refused")
}

// TestProbeTCPResets: the probe's close resets the connection, so the
// server reads a reset, not an end of file, and no TIME_WAIT is left.
// Real clock: real sockets.
func TestProbeTCPResets(t *testing.T) {
	for _, host := range loopbacks {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addr := addrPort(t, ln.Addr())
		// The first probe may make its socket, the next ones reuse it.
		for round := range 3 {
			read := make(chan error, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					read <- err
					return
				}
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound on a hung test
				_, err = c.Read(make([]byte, 1))
				read <- err
			}()
			wantPass(t, "tcp "+addr.String(), probe(t, addr, Spec{Type: "tcp"}))
			if err := <-read; !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("%s, probe %d: the server read %v, want a reset (not %v)", addr, round+1, err, io.EOF)
			}
		}
	}
}

// TestProbeTCPSpare: a passing probe leaves its socket for the next one;
// a spare socket serves a connect that completes late (armed again on
// the shared poller, where its last probe left it), and one that is
// refused, after which a new socket is made. Real clock: real sockets.
func TestProbeTCPSpare(t *testing.T) {
	up := listenTCP(t, "127.0.0.1")
	closed := closedPort(t, "tcp", "127.0.0.1")
	late, ln := blackholeListener(t, "127.0.0.1")
	spare := func() int { return int(spares[0].Load()) - 1 }
	wantPass(t, "tcp "+up.String(), probe(t, up, Spec{Type: "tcp"}))
	fd := spare()
	if fd < 0 {
		t.Fatal("no spare socket after a passing probe")
	}
	for round := range 2 {
		done := make(chan error, 1)
		waiting := onPoller()
		go func() { done <- probe(t, late, Spec{Type: "tcp", Interval: "20s", Timeout: "10s"}) }()
		waitOnPoller(t, waiting+1)
		if got := spare(); got >= 0 {
			t.Fatalf("round %d: spare socket %d while the probe waits on %d", round+1, got, fd)
		}
		c, _, err := unix.Accept(ln) // room for the probe's next SYN
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(c)
		wantPass(t, fmt.Sprintf("round %d: tcp %s after an accept", round+1, late), <-done)
		if got := spare(); got != fd {
			t.Fatalf("round %d: spare socket %d, want %d again", round+1, got, fd)
		}
		fill := rawConnect(t, late) // fills the room again
		defer unix.Close(fill)
	}
	wantFail(t, "tcp "+closed.String(), probe(t, closed, Spec{Type: "tcp"}), "connect "+closed.String()+": connection refused")
	if got := spare(); got >= 0 {
		t.Fatalf("spare socket %d after a refused probe; want it closed", got)
	}
	wantPass(t, "tcp "+up.String()+" after a refusal", probe(t, up, Spec{Type: "tcp"}))
}

// TestConnectTCPSource: a socket bound to a source leaves from it, port
// chosen by the kernel; the mark is set when the process may.
func TestConnectTCPSource(t *testing.T) {
	for _, c := range []struct{ host, src string }{{"127.0.0.1", "127.0.0.2"}, {"::1", "::1"}} {
		addr := listenTCP(t, c.host)
		fd, err := connectTCP(t.Context(), addr, 0, netip.MustParseAddr(c.src))
		if err != nil {
			t.Fatalf("connect %s from %s: %v", addr, c.src, err)
		}
		name, err := unix.Getsockname(fd)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		switch a := name.(type) {
		case *unix.SockaddrInet4:
			got = fmt.Sprint(netip.AddrFrom4(a.Addr), a.Port != 0)
		case *unix.SockaddrInet6:
			got = fmt.Sprint(netip.AddrFrom16(a.Addr), a.Port != 0)
		}
		if want := c.src + " true"; got != want {
			t.Errorf("connect %s from %s: local address, port set: %s, want %s", addr, c.src, got, want)
		}
	}

	addr := listenTCP(t, "127.0.0.1")
	fd, err := connectTCP(t.Context(), addr, 0x1234, netip.Addr{})
	if err != nil {
		if errText(err) != "set SO_MARK 4660: operation not permitted" {
			t.Fatalf("connect with a mark: %v", err)
		}
		return
	}
	mark, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK)
	unix.Close(fd)
	if err != nil || mark != 0x1234 {
		t.Errorf("SO_MARK read back %#x (%v), want 0x1234", mark, err)
	}
}

// withoutMarkCaps runs f on a thread of its own that lacks the
// capabilities SO_MARK needs (CAP_NET_ADMIN, CAP_NET_RAW); capabilities
// are a thread's, and the thread ends with f.
func withoutMarkCaps(t *testing.T, f func()) {
	t.Helper()
	done := make(chan error)
	go func() {
		var err error
		defer func() { done <- err }()
		runtime.LockOSThread() // never unlocked: the thread exits after f
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err = unix.Capget(&hdr, &data[0]); err != nil {
			return
		}
		data[0].Effective &^= 1<<unix.CAP_NET_ADMIN | 1<<unix.CAP_NET_RAW
		if err = unix.Capset(&hdr, &data[0]); err != nil {
			return
		}
		f()
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestProbeTCPMarkDenied: without the right to set SO_MARK, the probe
// fails, saying so.
func TestProbeTCPMarkDenied(t *testing.T) {
	addr := listenTCP(t, "127.0.0.1")
	var err error
	withoutMarkCaps(t, func() {
		err = Probe(context.Background(), Target{Addr: addr, Mark: 7, Spec: Spec{Type: "tcp"}})
	})
	wantFail(t, "tcp with mark, not allowed", err, "connect "+addr.String()+": set SO_MARK 7: operation not permitted")
	if !errors.Is(err, syscall.EPERM) {
		t.Errorf("%v: not EPERM to errors.Is", err)
	}
}

// TestConnPollerStale: an event epoll_wait returned for a socket whose
// probe then gave up wakes no waiter of a later socket with the same fd
// number.
func TestConnPollerStale(t *testing.T) {
	closed := closedPort(t, "tcp", "127.0.0.1")
	hole := blackhole(t, "127.0.0.1")
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(epfd)
	p := &connPoller{epfd: epfd, waiters: map[int32]*connWaiter{}}
	arm := func(fd int, w *connWaiter) {
		ev := unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLONESHOT, Fd: int32(fd), Pad: int32(w.gen)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			t.Fatal(err)
		}
	}
	for try := 0; ; try++ {
		// A's connect is refused, and epoll_wait returns its event...
		a := rawConnect(t, closed)
		wa, _ := p.register(a)
		arm(a, wa)
		evs := make([]unix.EpollEvent, 4)
		n, err := unix.EpollWait(epfd, evs, 10000)
		if err != nil || n != 1 || int(evs[0].Fd) != a {
			t.Fatalf("epoll_wait: %d events %+v, %v; want fd %d's", n, evs[:max(n, 0)], err, a)
		}
		// ...but A's probe gives up first, and B's socket takes A's fd.
		p.drop(a, wa)
		unix.Close(a)
		b := rawConnect(t, hole)
		if b != a {
			unix.Close(b)
			if try < 10 {
				continue
			}
			t.Fatalf("fd %d not reused: %d", a, b)
		}
		wb, _ := p.register(b)
		arm(b, wb)
		p.deliver(evs[:n])
		woken := len(wb.ready)
		p.drop(b, wb)
		unix.Close(b)
		if woken != 0 {
			t.Fatalf("the event of fd %d's first socket woke the waiter of its second", a)
		}
		break
	}
	p.deliver([]unix.EpollEvent{{Events: unix.EPOLLOUT, Fd: 99, Pad: 1}}) // no waiter

	// An event of the waiter's own generation wakes it.
	c, _ := p.register(7)
	p.deliver([]unix.EpollEvent{{Events: unix.EPOLLOUT | unix.EPOLLERR, Fd: 7, Pad: int32(c.gen)}})
	if len(c.ready) != 1 || c.events != unix.EPOLLOUT|unix.EPOLLERR || len(p.waiters) != 0 {
		t.Fatalf("fd 7's own event: ready %d, events %#x, waiters %d", len(c.ready), c.events, len(p.waiters))
	}
	<-c.ready

	// Delivered while its probe gives up: drop takes the delivery.
	e, _ := p.register(8)
	p.deliver([]unix.EpollEvent{{Events: unix.EPOLLOUT, Fd: 8, Pad: int32(e.gen)}})
	p.drop(8, e)
	if len(e.ready) != 0 || len(p.waiters) != 0 {
		t.Fatalf("after drop: ready %d, waiters %d", len(e.ready), len(p.waiters))
	}

	// A stopped poller fails the waits under way and those to come.
	d, _ := p.register(10)
	p.stop(errors.New("epoll_wait: bad file descriptor"))
	if len(d.ready) != 1 || d.events != 0 {
		t.Fatalf("stop: ready %d, events %#x", len(d.ready), d.events)
	}
	if _, err := p.register(11); err == nil || err.Error() != "epoll_wait: bad file descriptor" {
		t.Fatalf("register after stop: %v", err)
	}
}

// TestConnWaitReuse runs waits in parallel on the shared poller: sockets
// that connect, sockets whose connect never completes (their waits end at
// a short deadline), and sockets abandoned at once, whose events may be
// returned after their fd number went to another socket. A connect that
// never completes must never be reported writable.
func TestConnWaitReuse(t *testing.T) {
	up := listenTCP(t, "127.0.0.1")
	hole := blackhole(t, "127.0.0.1")
	const workers, rounds = 16, 150
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				if err := waitOnce(t, (w+i)%3, up, hole); err != nil {
					errs <- fmt.Errorf("worker %d, round %d: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func waitOnce(t *testing.T, kind int, up, hole netip.AddrPort) error {
	switch kind {
	case 0: // connects
		fd := rawConnect(t, up)
		defer unix.Close(fd)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ev, err := connWait.wait(ctx, fd)
		if err != nil || ev&unix.EPOLLOUT == 0 || ev&unix.EPOLLERR != 0 {
			return fmt.Errorf("connect to %s: events %#x, %v; want writable", up, ev, err)
		}
		if err := connectResult(fd, ev); err != nil {
			return fmt.Errorf("connect to %s: %v", up, err)
		}
	case 1: // never completes
		fd := rawConnect(t, hole)
		defer unix.Close(fd)
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		if ev, err := connWait.wait(ctx, fd); err != context.DeadlineExceeded {
			return fmt.Errorf("connect to blackhole %s: events %#x, %v; want the deadline", hole, ev, err)
		}
	case 2: // abandoned
		fd := rawConnect(t, up)
		defer unix.Close(fd)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if ev, err := connWait.wait(ctx, fd); err != nil && err != context.Canceled || err == nil && ev&unix.EPOLLOUT == 0 {
			return fmt.Errorf("abandoned connect to %s: events %#x, %v", up, ev, err)
		}
	}
	return nil
}

// TestProbeTCPParallel runs many probes at once, passing, refused and
// timing out, over IPv4 and IPv6; each gets its own result.
func TestProbeTCPParallel(t *testing.T) {
	type want struct {
		addr    netip.AddrPort
		timeout string
		msg     string
	}
	var wants []want
	for _, host := range loopbacks {
		closed := closedPort(t, "tcp", host)
		hole := blackhole(t, host)
		wants = append(wants, want{listenTCP(t, host), "5s", ""},
			want{closed, "5s", "connect " + closed.String() + ": connection refused"},
			want{hole, "20ms", "timeout after 20ms"})
	}
	const workers, rounds = 12, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				c := wants[(w+i)%len(wants)]
				err := Probe(context.Background(), Target{Addr: c.addr, Spec: Spec{Type: "tcp", Interval: "10s", Timeout: c.timeout}})
				if got := fmt.Sprint(err); err == nil && c.msg != "" || err != nil && got != c.msg {
					errs <- fmt.Errorf("probe of %s: %v, want %q", c.addr, err, c.msg)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// connectTCP returns, for a test to look at, a socket connected to addr, with mark as SO_MARK
// (0: none), bound to src when it is valid (port 0: the kernel picks), or
// the connect's error: an errno, a *markError, or ctx's error when ctx
// ends first.
func connectTCP(ctx context.Context, addr netip.AddrPort, mark uint32, src netip.Addr) (int, error) {
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	family, sa, err := tcpSockaddr(addr)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := connectFD(ctx, fd, family, sa, mark, src); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func connectFD(ctx context.Context, fd, family int, sa unix.Sockaddr, mark uint32, src netip.Addr) error {
	events, err := startConnect(fd, family, sa, mark, src)
	if err != nil {
		return err
	}
	if events == 0 {
		if events, err = connWait.wait(ctx, fd); err != nil {
			return err
		}
	}
	return connectResult(fd, events)
}
