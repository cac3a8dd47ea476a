package health

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// defaultMaxInFlight bounds the probes in flight when Options leaves it
// 0: 10,000 targets at a 2 s interval whose probes all time out at 1 s
// keep 5,000 in flight.
const defaultMaxInFlight = 8192

// Options configures a Checker.
type Options struct {
	// Probe runs one probe (nil: the package's Probe). The context it gets
	// carries the spec's timeout. A *WeightResult is a pass with a weight,
	// as Probe returns it.
	Probe func(ctx context.Context, t Target) error
	// Rand draws the first probe times and the jitter (nil: randomly
	// seeded). The checker serialises its use.
	Rand *rand.Rand
	// MaxInFlight bounds the probes running at once (0: 8192,
	// defaultMaxInFlight). Probes due beyond it wait, and start late.
	MaxInFlight int
	// Observe, when set, is told of each probe that ran to its end: its
	// target, how long it took and its result (a pass is nil or a
	// *WeightResult). It runs on the probe's goroutine and must be quick.
	Observe func(t Target, took time.Duration, err error)
}

// Checker probes a set of targets on schedule and tracks their states.
// Its methods may be called from any goroutine.
type Checker struct {
	probe   func(ctx context.Context, t Target) error
	observe func(t Target, took time.Duration, err error)
	max     int

	mu       sync.Mutex
	rnd      *rand.Rand
	entries  map[TargetKey]*entry
	gone     map[TargetKey]*entry // removed by Set while in flight
	queue    queue                // entries waiting for their next probe, soonest first
	inFlight int
	slow     map[*tcpProbe]struct{} // inline TCP probes whose connect is under way
	seeds    map[TargetKey]TargetState
	minIvl   time.Duration // the shortest interval of the set
	late     lateness
	running  bool
	ran      bool
	wakeAt   time.Time // when the scheduler wakes unless told (zero: never)
	holdEnd  time.Time // no probe starts before it (Hold); zero: none
	released time.Time // when the last hold ended

	pending      map[TargetKey]*pendingChange // changes not yet received
	pendingOrder []TargetKey                  // their order; keys may repeat or be gone

	wake    chan struct{} // tells the scheduler to look again
	notify  chan struct{} // tells the sender there are changes
	changes chan Change
}

// entry is one target's schedule and state; the checker's mutex guards
// every field but target and cfg, which never change.
type entry struct {
	key   TargetKey
	where place // the target less its spec, which cfg (shared) holds
	cfg   *config

	next     time.Time // scheduled start of the next probe
	index    int       // in the queue; -1 when not queued
	inFlight bool
	removed  bool

	state        State
	passes       int
	fails        int
	result       string
	lastProbe    time.Time
	lastDuration time.Duration
	lastLate     time.Duration
	lastChange   time.Time
	weight       *uint32 // see TargetState.Weight
}

// New returns a checker with no targets.
func New(opts Options) *Checker {
	c := &Checker{
		probe:   opts.Probe,
		observe: opts.Observe,
		max:     opts.MaxInFlight,
		rnd:     opts.Rand,
		entries: map[TargetKey]*entry{},
		gone:    map[TargetKey]*entry{},
		slow:    map[*tcpProbe]struct{}{},
		pending: map[TargetKey]*pendingChange{},
		wake:    make(chan struct{}, 1),
		notify:  make(chan struct{}, 1),
		changes: make(chan Change),
	}
	if c.max <= 0 {
		c.max = defaultMaxInFlight
	}
	if c.rnd == nil {
		c.rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return c
}

// Set replaces the checker's targets. Targets whose key stays keep their
// state and schedule; a new one starts Unknown (or as Restore seeded it)
// with its first probe at a random point of its first interval. Targets
// with equal keys share one probe. Set checks each spec as Validate does,
// without asking the host, and that via-vip targets have a mark; it
// changes nothing when one fails.
func (c *Checker) Set(targets []Target) error {
	return c.SetEach(len(targets), func(i int) Target { return targets[i] })
}

// SetEach is Set of n targets, the i-th of which target returns (it may
// be asked more than once for one): a caller that keeps its targets in
// another form need not build them all at once.
func (c *Checker) SetEach(n int, target func(i int) Target) error {
	ts, err := Prepare(n, target)
	if err != nil {
		return err
	}
	c.Apply(ts)
	return nil
}

// Targets are targets checked for a Checker's Apply.
type Targets struct {
	items  []prepared
	target func(i int) Target
}

type prepared struct {
	key TargetKey
	i   int
	cfg *config
}

// Prepare checks n targets as Set does, the i-th of which target returns,
// and keeps them for Apply; target must return the same until then. Set is
// Prepare then Apply: a caller with a change that must be quick (lvsctl
// run's reload putting the kernel's table right) makes it between them.
func Prepare(n int, target func(i int) Target) (*Targets, error) {
	ts := &Targets{items: make([]prepared, 0, n), target: target}
	// The real servers of a service come together and share its spec:
	// compiled and keyed once for the run.
	var keys Keys
	var group *Spec
	var cfg *config
	for i := range n {
		t := target(i)
		key := keys.Key(t)
		if keys.Spec() != group {
			var err error
			if cfg, err = compile(t.Spec); err != nil {
				return nil, fmt.Errorf("%s check of %s: %w", t.Spec.Type, t.Addr, err)
			}
			group = keys.Spec()
		}
		if err := checkTarget(t, cfg); err != nil {
			return nil, fmt.Errorf("%s check of %s: %w", t.Spec.Type, t.Addr, err)
		}
		ts.items = append(ts.items, prepared{key, i, cfg})
	}
	return ts, nil
}

// Apply makes ts the checker's targets, as Set does.
func (c *Checker) Apply(ts *Targets) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	next := make(map[TargetKey]*entry, len(ts.items))
	c.minIvl = 0
	for _, it := range ts.items {
		if next[it.key] != nil {
			continue
		}
		e := c.entries[it.key]
		if e == nil {
			if g := c.gone[it.key]; g != nil {
				// Back while its last probe runs: a new target, which
				// that probe's result counts for.
				delete(c.gone, it.key)
				e = g
				e.reset()
			} else {
				e = &entry{key: it.key, where: placeOf(ts.target(it.i)), cfg: it.cfg, index: -1}
				e.next = now.Add(c.randN(it.cfg.interval))
				c.queue.push(e)
			}
			if s, ok := c.seeds[it.key]; ok {
				e.seed(s)
			}
		}
		next[it.key] = e
		if c.minIvl == 0 || e.cfg.interval < c.minIvl {
			c.minIvl = e.cfg.interval
		}
	}
	for k, e := range c.entries {
		if next[k] == nil {
			e.removed = true
			if e.index >= 0 {
				c.queue.remove(e)
			}
			if e.inFlight {
				c.gone[k] = e
			}
			delete(c.pending, k)
		}
	}
	c.entries = next
	c.seeds = nil
	c.poke()
}

// Restore seeds states, as a journal kept them, for the current targets
// and those the next Set adds; call it before Run. A target restored Up
// stays up until it fails Fall times; one restored Down needs Rise
// passes. States other than Up and Down are ignored.
func (c *Checker) Restore(states []TargetState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seeds = map[TargetKey]TargetState{}
	for _, s := range states {
		if s.State != Up && s.State != Down {
			continue
		}
		if e := c.entries[s.Key]; e != nil {
			e.seed(s)
		} else {
			c.seeds[s.Key] = s
		}
	}
}

// place is where a target's probe goes: the target less its spec, a
// quarter of its size.
type place struct {
	addr    netip.AddrPort
	mark    uint32
	through netip.Addr
	vip     netip.AddrPort
	env     map[string]string
}

func placeOf(t Target) place { return place{t.Addr, t.Mark, t.Through, t.VIP, t.Env} }

// full is e's target.
func (e *entry) full() Target {
	w := &e.where
	return Target{Addr: w.addr, Mark: w.mark, Through: w.through, VIP: w.vip, Env: w.env, Spec: e.cfg.given}
}

// reset makes e a new target's entry, keeping its schedule.
func (e *entry) reset() {
	e.removed = false
	e.state, e.passes, e.fails, e.result = Unknown, 0, 0, ""
	e.lastProbe, e.lastDuration, e.lastLate, e.lastChange = time.Time{}, 0, 0, time.Time{}
	e.weight = nil
}

// seed gives e a state as a journal kept it; an Up one keeps its weight.
func (e *entry) seed(s TargetState) {
	e.state = s.State
	e.passes, e.fails = 0, 0
	e.lastChange = s.LastChange
	e.weight = nil
	if s.State == Up && s.Weight != nil {
		w := *s.Weight
		e.weight = &w
	}
}

// Changes delivers state transitions (see Change). It is closed when Run
// returns; transitions not received by then are dropped, as are those of
// targets that Set removed.
func (c *Checker) Changes() <-chan Change { return c.changes }

// Run probes the targets until ctx ends, then waits for the probes in
// flight and returns nil. A checker runs once.
func (c *Checker) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.ran {
		c.mu.Unlock()
		return errors.New("health: the checker has run already")
	}
	c.ran, c.running = true, true
	// Targets set before Run get their first probe within the first
	// interval from now.
	now := time.Now()
	for _, e := range c.entries {
		e.next = now.Add(c.randN(e.cfg.interval))
		c.queue.fix(e)
	}
	c.mu.Unlock()

	var wg sync.WaitGroup
	wg.Go(func() { c.send(ctx) })
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var due []*entry
	for {
		c.mu.Lock()
		now := time.Now()
		if !c.holdEnd.IsZero() && !now.Before(c.holdEnd) {
			c.released, c.holdEnd = c.holdEnd, time.Time{}
		}
		held := !c.holdEnd.IsZero()
		if !held {
			due = c.takeDue(now, due)
		}
		c.wakeAt = time.Time{}
		if c.inFlight < c.max && len(c.queue) > 0 {
			c.wakeAt = c.queue[0].next
			if held && c.wakeAt.Before(c.holdEnd) {
				c.wakeAt = c.holdEnd
			}
			timer.Reset(c.wakeAt.Sub(now))
		}
		c.mu.Unlock()
		// Outside the lock: a TCP probe runs here when it can (see
		// probeInline), any other on a goroutine of its own.
		for i, e := range due {
			if !c.probeInline(ctx, e, &wg) {
				wg.Go(func() { c.run(ctx, e) })
			}
			due[i] = nil
		}
		due = due[:0]
		select {
		case <-ctx.Done():
			timer.Stop()
			c.stopInline(&wg)
			wg.Wait()
			c.mu.Lock()
			c.running = false
			c.mu.Unlock()
			close(c.changes)
			return nil
		case <-c.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// maxBatch bounds the probes the scheduler starts before it looks at the
// time again; maxEarly is how early a probe may start with others. Ten
// thousand targets at a 20 s interval are due 500 times a second; each
// wake of the scheduler costs the kernel a timer and a switch.
const (
	maxBatch = 64
	maxEarly = 10 * time.Millisecond
)

// takeDue moves the probes due at now from the queue to due, in flight;
// c.mu is held. Probes due within the next few milliseconds start now
// too: the scheduler wakes once for them (a probe early by at most a
// hundredth of its interval).
func (c *Checker) takeDue(now time.Time, due []*entry) []*entry {
	soon := now.Add(min(maxEarly, c.minIvl/100))
	for c.inFlight < c.max && len(c.queue) > 0 && !c.queue[0].next.After(soon) && len(due) < maxBatch {
		e := c.queue.pop()
		e.inFlight = true
		c.inFlight++
		due = append(due, e)
	}
	return due
}

// run probes e once and records the result.
func (c *Checker) run(ctx context.Context, e *entry) {
	start := time.Now()
	var err error
	if c.probe == nil {
		err = probeTimed(ctx, e.full(), e.cfg, probeWith)
	} else {
		err = probeTimed(ctx, e.full(), e.cfg, func(ctx context.Context, t Target, _ *config) error {
			return c.probe(ctx, t)
		})
	}
	c.finish(ctx, e, start, time.Now(), err, nil)
}

// finish records the result of e's probe, which ran from start to end;
// slow is the inline probe's record, if it was one whose connect was
// under way.
func (c *Checker) finish(ctx context.Context, e *entry, start, end time.Time, err error, slow *tcpProbe) {
	if c.observe != nil && ctx.Err() == nil {
		c.observe(e.full(), end.Sub(start), err)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if slow != nil {
		delete(c.slow, slow)
	}
	wasFull := c.inFlight >= c.max
	c.inFlight--
	e.inFlight = false
	if ctx.Err() != nil {
		return // stopping: the probe was cut short
	}
	// A probe due during a hold is late from the hold's end only: the
	// hold is no sign of probes falling behind.
	late := max(start.Sub(later(e.next, c.released)), 0)
	c.late.add(late, start)
	if e.removed {
		if c.gone[e.key] == e {
			delete(c.gone, e.key)
		}
		return
	}
	e.lastProbe, e.lastDuration, e.lastLate = start, end.Sub(start), late
	old, oldWeight := e.state, e.weight
	pass := passed(err)
	e.result = resultOK
	if !pass {
		e.result = err.Error()
	}
	changed := e.record(pass)
	// A pass sets the weight; failures keep it while the target stays up
	// (keepalived's misc_check_child_thread), and a target down has none.
	if pass {
		e.weight = weightOf(err)
	} else if e.state == Down {
		e.weight = nil
	}
	if changed {
		e.lastChange = end
	}
	if changed || e.state == Up && !sameWeight(oldWeight, e.weight) {
		c.queueChange(e, old, oldWeight, end)
	}
	// The next probe follows this one's start by the interval ±10 %; one
	// that outlasted that starts now, late.
	ivl := e.cfg.interval
	e.next = start.Add(ivl - ivl/10 + c.randN(ivl/5+1))
	c.queue.push(e)
	if wasFull || c.wakeAt.IsZero() || e.next.Before(c.wakeAt) {
		c.poke()
	}
}

// record counts a probe's result and applies the state machine; it
// reports whether the state changed.
func (e *entry) record(pass bool) bool {
	if pass {
		e.passes++
		e.fails = 0
	} else {
		e.fails++
		e.passes = 0
	}
	old := e.state
	switch {
	case e.state == Unknown && pass:
		e.state = Up
	case e.state != Down && !pass && e.fails >= e.cfg.spec.Fall:
		e.state = Down
	case e.state == Down && pass && e.passes >= e.cfg.spec.Rise:
		e.state = Up
	}
	return e.state != old
}

// pendingChange is a change not yet received, with the weight before it.
type pendingChange struct {
	Change
	oldWeight *uint32
}

// sameWeight reports whether a and b are the same weight, or both none.
func sameWeight(a, b *uint32) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// queueChange adds e's transition from old and oldWeight to the changes
// not yet received.
func (c *Checker) queueChange(e *entry, old State, oldWeight *uint32, at time.Time) {
	if p := c.pending[e.key]; p != nil {
		p.New, p.Result, p.At, p.Weight = e.state, e.result, at, e.weight
		if p.New == p.Old && sameWeight(p.Weight, p.oldWeight) {
			delete(c.pending, e.key)
		}
		return
	}
	c.pending[e.key] = &pendingChange{Change{Key: e.key, Target: e.full(), Old: old, New: e.state, Result: e.result, At: at, Weight: e.weight}, oldWeight}
	c.pendingOrder = append(c.pendingOrder, e.key)
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// send delivers queued changes on c.changes until ctx ends.
func (c *Checker) send(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.notify:
		}
		for {
			c.mu.Lock()
			var ch *pendingChange
			for ch == nil && len(c.pendingOrder) > 0 {
				k := c.pendingOrder[0]
				c.pendingOrder = c.pendingOrder[1:]
				if ch = c.pending[k]; ch != nil {
					delete(c.pending, k)
				}
			}
			if len(c.pendingOrder) == 0 {
				c.pendingOrder = nil
			}
			c.mu.Unlock()
			if ch == nil {
				break
			}
			select {
			case c.changes <- ch.Change:
			case <-ctx.Done():
				return
			}
		}
	}
}

// Hold keeps new probes from starting until Release, for half the
// shortest interval at most; probes in flight finish. A caller about to
// spend the processor on something that must be quick (lvsctl run
// reading a large file on reload) gets it first. Probes due meanwhile
// start at the end of the hold, and their lateness counts from there.
func (c *Checker) Hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.minIvl > 0 {
		c.holdEnd = time.Now().Add(c.minIvl / 2)
	}
}

// Release ends a hold.
func (c *Checker) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.holdEnd.IsZero() {
		c.released, c.holdEnd = time.Now(), time.Time{}
		c.poke()
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// poke wakes the scheduler.
func (c *Checker) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// randN returns a random duration in [0, d).
func (c *Checker) randN(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(c.rnd.Int64N(int64(d)))
}

// Snapshot returns every target's state, ordered by key, with the
// lateness figures.
func (c *Checker) Snapshot() Status {
	c.mu.Lock()
	st := Status{Targets: make([]TargetState, 0, len(c.entries)), InFlight: c.inFlight}
	for _, e := range c.entries {
		ts := e.targetState()
		ts.Target = e.full()
		st.Targets = append(st.Targets, ts)
	}
	st.Lateness = c.late.stats(time.Now())
	c.mu.Unlock()
	// Sorted outside the lock: probes record their results meanwhile.
	slices.SortFunc(st.Targets, func(a, b TargetState) int { return a.Key.compare(b.Key) })
	return st
}

// State returns the state of the target of key k, without its Target;
// false when the checker has no such target. It costs a lookup: a
// caller that visits every target of a large set this way keeps no
// snapshot of them all.
func (c *Checker) State(k TargetKey) (TargetState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[k]
	if e == nil {
		return TargetState{}, false
	}
	return e.targetState(), true
}

// targetState is e's state, without its Target; c.mu is held.
func (e *entry) targetState() TargetState {
	return TargetState{
		Key: e.key, State: e.state,
		Passes: e.passes, Fails: e.fails, Result: e.result,
		LastProbe: e.lastProbe, LastDuration: e.lastDuration, LastLate: e.lastLate,
		LastChange: e.lastChange, Weight: e.weight,
	}
}

// Lateness returns how late probes started.
func (c *Checker) Lateness() Lateness {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.late.stats(time.Now())
}

// OnTime reports whether probes keep to their schedule within threshold:
// the recent p99 lateness is at most threshold and, while Run runs, no
// probe waits for its start longer than that.
func (c *Checker) OnTime(threshold time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.late.stats(now).RecentP99 > threshold {
		return false
	}
	return !c.running || len(c.queue) == 0 || now.Sub(c.queue[0].next) <= threshold
}

// Healthy is OnTime with a tenth of the shortest interval among the
// targets: false means the probes fall behind.
func (c *Checker) Healthy() bool {
	c.mu.Lock()
	threshold := c.minIvl / 10
	c.mu.Unlock()
	return c.OnTime(threshold)
}

// compare orders keys for listings.
func (k TargetKey) compare(o TargetKey) int {
	if c := k.Addr.Compare(o.Addr); c != 0 {
		return c
	}
	if k.Mark != o.Mark {
		if k.Mark < o.Mark {
			return -1
		}
		return 1
	}
	if c := strings.Compare(k.Spec, o.Spec); c != 0 {
		return c
	}
	return strings.Compare(k.Env, o.Env)
}

// queue is a min-heap of entries by next probe time.
type queue []*entry

func (q queue) less(i, j int) bool { return q[i].next.Before(q[j].next) }

func (q queue) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}

func (q *queue) push(e *entry) {
	e.index = len(*q)
	*q = append(*q, e)
	q.up(e.index)
}

func (q *queue) pop() *entry {
	e := (*q)[0]
	q.remove(e)
	return e
}

func (q *queue) remove(e *entry) {
	i, n := e.index, len(*q)-1
	if i != n {
		q.swap(i, n)
	}
	(*q)[n] = nil
	*q = (*q)[:n]
	e.index = -1
	if i != n {
		q.fix((*q)[i])
	}
}

// fix restores the order after e's time changed.
func (q queue) fix(e *entry) {
	if e.index < 0 {
		return
	}
	if !q.down(e.index) {
		q.up(e.index)
	}
}

func (q queue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

// down moves i towards the leaves; it reports whether i moved.
func (q queue) down(i int) bool {
	start := i
	for {
		l := 2*i + 1
		if l >= len(q) {
			break
		}
		m := l
		if r := l + 1; r < len(q) && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q.swap(i, m)
		i = m
	}
	return i != start
}
