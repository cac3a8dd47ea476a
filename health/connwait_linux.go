package health

import (
	"context"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// connWait is the process's one epoll instance for TCP probes whose
// connect is still in progress when connect returns.
var connWait connPoller

// connPoller waits for the connects of many sockets on one epoll
// instance, started at its first use. A socket is registered once, for
// EPOLLOUT with EPOLLONESHOT, with its fd and a generation as the event's
// data; the instance is itself registered once with the runtime's poller,
// so no thread blocks in epoll_wait for it and probe sockets cost the
// runtime's poller nothing.
//
// Waiters are found by fd and generation. A probe that gives up takes its
// waiter out of the map, then closes its socket, which takes the socket
// out of the epoll instance. Yet an event epoll_wait returned just before
// may be handled after another probe's socket took the same fd number, or
// a forked child still holding the socket keeps it registered: such an
// event's generation is not the new waiter's, and it is dropped.
type connPoller struct {
	once sync.Once
	epfd int
	file *os.File // epfd, for the runtime's poller; never closed

	mu      sync.Mutex
	err     error // why the poller stopped: every wait fails with it
	waiters map[int32]*connWaiter
	gen     uint32
}

// connWaiter is one registered socket's waiter: wait's, woken by a send
// on ready, or watch's, told through done.
type connWaiter struct {
	gen    uint32
	events uint32        // set before the send on ready; 0 when the poller stopped
	ready  chan struct{} // one send per registration, buffered
	done   connDone
}

// connDone is told of the end of a watched connect: the socket's poll
// events, or why the poller stopped. It runs on the poller's goroutine
// and must be quick.
type connDone interface {
	connDone(events uint32, err error)
}

var connWaiters = sync.Pool{New: func() any { return &connWaiter{ready: make(chan struct{}, 1)} }}

// wait returns the poll events of fd, a socket whose connect is in
// progress, once it is writable or has an error, or ctx's error when ctx
// ends first. fd stays open until wait returns; its caller closes it.
func (p *connPoller) wait(ctx context.Context, fd int) (uint32, error) {
	p.once.Do(p.start)
	w, err := p.register(fd)
	if err != nil {
		return 0, err
	}
	defer connWaiters.Put(w)
	if err := p.arm(fd, w.gen); err != nil {
		p.drop(fd, w)
		return 0, err
	}
	select {
	case <-w.ready:
		if w.events == 0 {
			p.mu.Lock()
			defer p.mu.Unlock()
			return 0, p.err
		}
		return w.events, nil
	case <-ctx.Done():
		p.drop(fd, w)
		return 0, ctx.Err()
	}
}

// watch has done told of the end of fd's connect, which is in progress,
// unless cancel comes first; it returns the registration's generation,
// for cancel. fd stays open until done is told or cancel succeeds.
func (p *connPoller) watch(fd int, done connDone) (uint32, error) {
	p.once.Do(p.start)
	w, err := p.registerWith(fd, &connWaiter{done: done})
	if err != nil {
		return 0, err
	}
	if err := p.arm(fd, w.gen); err != nil {
		p.cancel(fd, w.gen)
		return 0, err
	}
	return w.gen, nil
}

// arm registers fd for one event under gen. A socket kept for another
// probe (see spares) is registered already, its last event spent: it is
// armed again.
func (p *connPoller) arm(fd int, gen uint32) error {
	ev := unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLONESHOT, Fd: int32(fd), Pad: int32(gen)}
	err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev)
	if err == unix.EEXIST {
		err = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_MOD, fd, &ev)
	}
	if err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// cancel takes fd's watch of generation gen away, before fd is closed;
// false means done has been or is being told, and will be.
func (p *connPoller) cancel(fd int, gen uint32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.waiters[int32(fd)]; w != nil && w.gen == gen {
		delete(p.waiters, int32(fd))
		return true
	}
	return false
}

// register makes a waiter for fd under a new generation. It comes before
// the epoll registration, whose event may be returned at once.
func (p *connPoller) register(fd int) (*connWaiter, error) {
	return p.registerWith(fd, nil)
}

// registerWith registers w, or a waiter from the pool when w is nil.
func (p *connPoller) registerWith(fd int, w *connWaiter) (*connWaiter, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, p.err
	}
	if w == nil {
		w = connWaiters.Get().(*connWaiter)
	}
	p.gen++
	w.gen = p.gen
	p.waiters[int32(fd)] = w
	return w, nil
}

// drop takes w, fd's waiter, out of the map before fd is closed; if the
// poller has delivered to it meanwhile, drop takes the delivery, so that
// w goes back to the pool empty.
func (p *connPoller) drop(fd int, w *connWaiter) {
	p.mu.Lock()
	mine := p.waiters[int32(fd)] == w
	if mine {
		delete(p.waiters, int32(fd))
	}
	p.mu.Unlock()
	if !mine {
		<-w.ready
	}
}

// deliver hands each event to the waiter of its fd and generation.
// Watchers are told after the lock is released, in the events' order.
func (p *connPoller) deliver(evs []unix.EpollEvent) {
	var buf [64]*connWaiter
	told := buf[:0]
	p.mu.Lock()
	for _, ev := range evs {
		w := p.waiters[ev.Fd]
		if w == nil || w.gen != uint32(ev.Pad) {
			continue // a closed socket's, its fd reused
		}
		delete(p.waiters, ev.Fd)
		w.events = ev.Events
		if w.done != nil {
			told = append(told, w)
			continue
		}
		w.ready <- struct{}{}
	}
	p.mu.Unlock()
	for _, w := range told {
		w.done.connDone(w.events, nil)
	}
}

func (p *connPoller) start() {
	p.waiters = map[int32]*connWaiter{}
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		p.err = os.NewSyscallError("epoll_create1", err)
		return
	}
	// Non-blocking, the descriptor is pollable for os.NewFile: the
	// runtime's poller tells when the instance has events.
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		p.err = os.NewSyscallError("fcntl", err)
		return
	}
	p.epfd = fd
	p.file = os.NewFile(uintptr(fd), "tcp-probe-epoll")
	rc, err := p.file.SyscallConn()
	if err != nil {
		p.err = err
		return
	}
	go p.loop(rc)
}

// loop collects events without blocking in epoll_wait: when there are
// none, RawConn.Read parks until the runtime's poller reports the
// instance readable. It runs for the life of the process unless
// epoll_wait fails, which stops the poller.
func (p *connPoller) loop(rc syscall.RawConn) {
	var evs [256]unix.EpollEvent
	var n int
	var werr error
	collect := func(fd uintptr) bool {
		n, werr = unix.EpollWait(int(fd), evs[:], 0)
		return n > 0 || werr != nil
	}
	for {
		err := rc.Read(collect)
		if err == nil && werr == unix.EINTR {
			continue
		}
		if err == nil && werr != nil {
			err = os.NewSyscallError("epoll_wait", werr)
		}
		if err != nil {
			p.stop(err)
			return
		}
		p.deliver(evs[:n])
	}
}

// stop fails every wait and watch, those under way and those to come,
// with err.
func (p *connPoller) stop(err error) {
	var told []*connWaiter
	p.mu.Lock()
	p.err = err
	for fd, w := range p.waiters {
		delete(p.waiters, fd)
		w.events = 0
		if w.done != nil {
			told = append(told, w)
			continue
		}
		w.ready <- struct{}{}
	}
	p.mu.Unlock()
	for _, w := range told {
		w.done.connDone(0, err)
	}
}
