package health

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// probeInline runs e's probe on the scheduler's goroutine when it is a
// TCP probe of the package's own (no Options.Probe), and reports whether
// it did. A connect that is over when connect returns, as most to a
// local or veth peer are, is recorded at once; one under way is left to
// the shared poller, whose goroutine records it, or to a timer at its
// deadline. No goroutine, context or channel per probe: for the many
// targets of a director, a probe's cost is then mostly the kernel's.
func (c *Checker) probeInline(ctx context.Context, e *entry, wg *sync.WaitGroup) bool {
	if c.probe != nil || e.cfg.spec.Type != "tcp" {
		return false
	}
	start := time.Now()
	s, done, err := tcpStart(e.key.Addr, e.where.mark, e.where.through)
	if done {
		c.finish(ctx, e, start, time.Now(), err, nil)
		return true
	}
	p := &tcpProbe{c: c, ctx: ctx, e: e, wg: wg, s: s, start: start}
	wg.Add(1)
	c.mu.Lock()
	c.slow[p] = struct{}{}
	c.mu.Unlock()
	// From here on the poller may tell p of the connect's end.
	gen, err := connWait.watch(s.fd, p)
	if err != nil {
		p.connDone(0, err)
		return true
	}
	p.gen = gen
	t := time.AfterFunc(e.cfg.timeout-time.Since(start), p.expire)
	if !p.timer.CompareAndSwap(nil, t) {
		t.Stop() // the connect ended meanwhile
	}
	return true
}

// tcpProbe is an inline TCP probe whose connect is under way. Whichever
// of the poller (connDone), the timer (expire) and a stopping Run
// (stopInline) takes its watch away from the poller first ends it; the
// poller's cancel decides.
type tcpProbe struct {
	c     *Checker
	ctx   context.Context
	e     *entry
	wg    *sync.WaitGroup
	s     probeSock
	start time.Time
	gen   uint32                     // the watch's; set before the timer starts
	timer atomic.Pointer[time.Timer] // timerGone once connDone ran
}

// timerGone marks a probe whose connect ended: its timer, if it comes
// later, is stopped at once.
var timerGone = new(time.Timer)

func (p *tcpProbe) connDone(events uint32, err error) {
	if t := p.timer.Swap(timerGone); t != nil {
		t.Stop()
	}
	addr := p.e.key.Addr
	if err != nil {
		sysClose(p.s.fd)
		p.end(failure(err, "connect "+addr.String()))
		return
	}
	p.end(tcpFinish(p.s, addr, events))
}

func (p *tcpProbe) expire() {
	if !connWait.cancel(p.s.fd, p.gen) {
		return // connDone has it
	}
	sysClose(p.s.fd)
	p.end(fmt.Errorf("timeout after %s", p.e.cfg.timeout))
}

func (p *tcpProbe) end(err error) {
	p.c.finish(p.ctx, p.e, p.start, time.Now(), err, p)
	p.wg.Done()
}

// stopInline ends the inline probes under way as Run stops; those the
// poller or a timer took first end on their own. It runs on the
// scheduler's goroutine, which started them all.
func (c *Checker) stopInline(wg *sync.WaitGroup) {
	c.mu.Lock()
	slow := make([]*tcpProbe, 0, len(c.slow))
	for p := range c.slow {
		slow = append(slow, p)
	}
	c.mu.Unlock()
	for _, p := range slow {
		if connWait.cancel(p.s.fd, p.gen) {
			sysClose(p.s.fd)
			p.end(p.ctx.Err())
		}
	}
}
