package health

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The checker tests run in synctest bubbles: time is fake, and advances
// only when every goroutine of the bubble waits, so schedules are exact.

func tcpTarget(addr string, s Spec) Target {
	if s.Type == "" {
		s.Type = "tcp"
	}
	return Target{Addr: netip.MustParseAddrPort(addr), Spec: s}
}

// fakeProbes answers probes by address and records them.
type fakeProbes struct {
	mu      sync.Mutex
	answer  map[netip.AddrPort]func(n int, ctx context.Context) error // n counts from 0
	starts  map[netip.AddrPort][]time.Time
	running map[netip.AddrPort]int
	maxRun  map[netip.AddrPort]int
	total   int // running now, all addresses
	maxAll  int
}

func newFakeProbes() *fakeProbes {
	return &fakeProbes{
		answer:  map[netip.AddrPort]func(int, context.Context) error{},
		starts:  map[netip.AddrPort][]time.Time{},
		running: map[netip.AddrPort]int{},
		maxRun:  map[netip.AddrPort]int{},
	}
}

func (f *fakeProbes) set(addr string, fn func(n int, ctx context.Context) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer[netip.MustParseAddrPort(addr)] = fn
}

func (f *fakeProbes) probe(ctx context.Context, t Target) error {
	f.mu.Lock()
	n := len(f.starts[t.Addr])
	f.starts[t.Addr] = append(f.starts[t.Addr], time.Now())
	f.running[t.Addr]++
	f.maxRun[t.Addr] = max(f.maxRun[t.Addr], f.running[t.Addr])
	f.total++
	f.maxAll = max(f.maxAll, f.total)
	fn := f.answer[t.Addr]
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.running[t.Addr]--
		f.total--
		f.mu.Unlock()
	}()
	if fn == nil {
		return nil
	}
	return fn(n, ctx)
}

func (f *fakeProbes) startsOf(addr string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.starts[netip.MustParseAddrPort(addr)])
}

// waitProbes lets fake time pass until addr had n probes, and their
// results are in.
func waitProbes(f *fakeProbes, addr string, n int) {
	for len(f.startsOf(addr)) < n {
		time.Sleep(time.Millisecond)
	}
	synctest.Wait()
}

func pass(int, context.Context) error { return nil }
func fail(int, context.Context) error { return errors.New("connect: refused") }

// passUntil passes the first n probes and fails the rest.
func passUntil(n int) func(int, context.Context) error {
	return func(i int, ctx context.Context) error {
		if i < n {
			return nil
		}
		return fail(i, ctx)
	}
}

// run starts c in the bubble; the returned stop ends it and returns the
// changes it delivered.
func run(t *testing.T, c *Checker) (stop func() []Change) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var changes []Change
	var mu sync.Mutex
	recv := make(chan struct{})
	go func() {
		defer close(recv)
		for ch := range c.Changes() {
			mu.Lock()
			changes = append(changes, ch)
			mu.Unlock()
		}
	}()
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	return func() []Change {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		<-recv
		mu.Lock()
		defer mu.Unlock()
		return changes
	}
}

func newChecker(f *fakeProbes, maxInFlight int) *Checker {
	return New(Options{Probe: f.probe, Rand: rand.New(rand.NewPCG(1, 2)), MaxInFlight: maxInFlight})
}

func stateOf(t *testing.T, c *Checker, addr string) TargetState {
	t.Helper()
	ap := netip.MustParseAddrPort(addr)
	for _, s := range c.Snapshot().Targets {
		if s.Key.Addr == ap {
			return s
		}
	}
	t.Fatalf("no target %s in the snapshot", addr)
	return TargetState{}
}

func TestStateMachine(t *testing.T) {
	cfg, err := compile(Spec{Type: "tcp", Rise: 2, Fall: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from  State
		probe string // p: pass, f: fail
		want  string // state after each probe: U, u (up), d (down)
	}{
		{Unknown, "p", "u"},
		{Unknown, "ffp", "UUu"},
		{Unknown, "fff", "UUd"},
		{Unknown, "fffpp", "UUddu"},
		{Unknown, "pffpfff", "uuuuuud"},
		{Up, "ffpff", "uuuuu"},
		{Up, "fffp", "uudd"},
		{Down, "p", "d"},
		{Down, "pfpp", "dddu"},
	} {
		e := &entry{cfg: cfg, state: tc.from}
		got := ""
		for _, p := range tc.probe {
			e.record(p == 'p')
			got += map[State]string{Unknown: "U", Up: "u", Down: "d"}[e.state]
		}
		if got != tc.want {
			t.Errorf("from %s, probes %s: states %s, want %s", tc.from, tc.probe, got, tc.want)
		}
	}
	// Rise 1 brings a down server back at its first pass.
	cfg1, _ := compile(Spec{Type: "tcp", Rise: 1, Fall: 1})
	e := &entry{cfg: cfg1, state: Down}
	if !e.record(true) || e.state != Up {
		t.Errorf("rise 1: state %s after a pass, want up", e.state)
	}
}

// fiftyTargets are 50 TCP targets with the default spec, and their
// addresses.
func fiftyTargets() ([]Target, []string) {
	var targets []Target
	var addrs []string
	for i := range 50 {
		addr := netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), uint16(1000+i)).String()
		addrs = append(addrs, addr)
		targets = append(targets, tcpTarget(addr, Spec{}))
	}
	return targets, addrs
}

func TestCheckerSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeProbes()
		c := newChecker(f, 0)
		targets, addrs := fiftyTargets()
		if err := c.Set(targets); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		stop := run(t, c)
		time.Sleep(60 * time.Second)
		synctest.Wait()
		stop()

		ivl := 2 * time.Second
		var firsts []time.Duration
		gaps := map[time.Duration]bool{}
		total := 0
		for _, a := range addrs {
			s := f.startsOf(a)
			total += len(s)
			if len(s) < 27 {
				t.Fatalf("%s: %d probes in 60s at 2s±10%%", a, len(s))
			}
			first := s[0].Sub(start)
			firsts = append(firsts, first)
			if first < 0 || first >= ivl {
				t.Errorf("%s: first probe at %s, want within the first interval", a, first)
			}
			for i := 1; i < len(s); i++ {
				gap := s[i].Sub(s[i-1])
				gaps[gap] = true
				if gap < ivl*9/10 || gap > ivl*11/10 {
					t.Errorf("%s: probes %d and %d %s apart, want 2s±10%%", a, i-1, i, gap)
				}
			}
		}
		// Spread, not in step: first probes and gaps vary.
		slices.Sort(firsts)
		if firsts[len(firsts)-1]-firsts[0] < ivl/2 {
			t.Errorf("first probes bunch within %s", firsts[len(firsts)-1]-firsts[0])
		}
		if len(gaps) < 100 {
			t.Errorf("only %d different gaps between probes: no jitter", len(gaps))
		}
		// Fake time stands still while goroutines run: nothing starts late.
		l := c.Lateness()
		if l.Count != uint64(total) || l.Max != 0 || l.RecentP99 != 0 {
			t.Errorf("lateness %+v, want %d probes none late", l, total)
		}
		if !c.Healthy() {
			t.Error("Healthy false with every probe on time")
		}
	})
}

func TestCheckerTransitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeProbes()
		f.set("10.0.0.1:80", pass)
		f.set("10.0.0.2:80", fail)
		f.set("10.0.0.3:80", passUntil(3))
		f.set("10.0.0.4:80", func(n int, ctx context.Context) error {
			if n >= 2 && n < 5 { // fails 3 times, then passes
				return fail(n, ctx)
			}
			return nil
		})
		c := newChecker(f, 0)
		spec := Spec{Interval: "1s", Timeout: "500ms", Rise: 2, Fall: 3}
		if err := c.Set([]Target{
			tcpTarget("10.0.0.1:80", spec), tcpTarget("10.0.0.2:80", spec),
			tcpTarget("10.0.0.3:80", spec), tcpTarget("10.0.0.4:80", spec),
		}); err != nil {
			t.Fatal(err)
		}
		for _, s := range c.Snapshot().Targets {
			if s.State != Unknown || s.Result != "" {
				t.Errorf("%s before Run: %s %q, want unknown and no result", s.Key.Addr, s.State, s.Result)
			}
		}
		stop := run(t, c)
		time.Sleep(20 * time.Second)
		synctest.Wait()
		st := map[string]TargetState{}
		for _, a := range []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80"} {
			st[a] = stateOf(t, c, a)
		}
		changes := stop()

		type tr struct {
			addr     string
			old, new State
			probe    int // the probe (from 0) that made it
		}
		want := []tr{
			{"10.0.0.1:80", Unknown, Up, 0},
			{"10.0.0.2:80", Unknown, Down, 2},
			{"10.0.0.3:80", Unknown, Up, 0}, {"10.0.0.3:80", Up, Down, 5},
			{"10.0.0.4:80", Unknown, Up, 0}, {"10.0.0.4:80", Up, Down, 4}, {"10.0.0.4:80", Down, Up, 6},
		}
		for _, w := range want {
			i := slices.IndexFunc(changes, func(ch Change) bool {
				return ch.Key.Addr.String() == w.addr && ch.Old == w.old && ch.New == w.new
			})
			if i < 0 {
				t.Errorf("no change %s %s -> %s in %+v", w.addr, w.old, w.new, changes)
				continue
			}
			ch := changes[i]
			changes = slices.Delete(changes, i, i+1)
			if at := f.startsOf(w.addr)[w.probe]; ch.At != at {
				t.Errorf("%s %s -> %s at %v, want at probe %d (%v)", w.addr, w.old, w.new, ch.At, w.probe, at)
			}
			wantResult := resultOK
			if w.new == Down {
				wantResult = "connect: refused"
			}
			if ch.Result != wantResult || ch.Target.Addr.String() != w.addr {
				t.Errorf("change %+v: want result %q for target %s", ch, wantResult, w.addr)
			}
		}
		if len(changes) > 0 {
			t.Errorf("unexpected changes %+v", changes)
		}
		for a, want := range map[string]TargetState{
			"10.0.0.1:80": {State: Up, Result: resultOK},
			"10.0.0.2:80": {State: Down, Result: "connect: refused"},
			"10.0.0.3:80": {State: Down, Result: "connect: refused"},
			"10.0.0.4:80": {State: Up, Result: resultOK},
		} {
			s := st[a]
			n := len(f.startsOf(a))
			if s.State != want.State || s.Result != want.Result {
				t.Errorf("%s: %s %q, want %s %q", a, s.State, s.Result, want.State, want.Result)
			}
			if (want.Result == resultOK && (s.Passes < 10 || s.Fails != 0)) || (want.Result != resultOK && (s.Fails < 10 || s.Passes != 0)) {
				t.Errorf("%s after %d probes: %d passes, %d failures in a row", a, n, s.Passes, s.Fails)
			}
			if s.LastProbe != f.startsOf(a)[n-1] {
				t.Errorf("%s: last probe %v, want %v", a, s.LastProbe, f.startsOf(a)[n-1])
			}
		}
	})
}

func TestCheckerRestore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeProbes()
		f.set("10.0.0.1:80", func(n int, ctx context.Context) error {
			if n < 2 {
				return fail(n, ctx) // two failures: fewer than fall
			}
			return nil
		})
		f.set("10.0.0.2:80", pass)
		f.set("10.0.0.3:80", fail)
		spec := Spec{Interval: "1s", Timeout: "500ms", Rise: 2, Fall: 3}
		a, b, d := tcpTarget("10.0.0.1:80", spec), tcpTarget("10.0.0.2:80", spec), tcpTarget("10.0.0.3:80", spec)
		c := newChecker(f, 0)
		// Set before Restore for a; Restore before Set for b and d.
		if err := c.Set([]Target{a}); err != nil {
			t.Fatal(err)
		}
		was := time.Now().Add(-time.Hour)
		c.Restore([]TargetState{
			{Key: a.Key(), State: Up, LastChange: was},
			{Key: b.Key(), State: Down, LastChange: was},
			{Key: d.Key(), State: Up},
			{Key: tcpTarget("10.0.0.9:80", spec).Key(), State: Down},
		})
		if err := c.Set([]Target{a, b, d}); err != nil {
			t.Fatal(err)
		}
		if s := stateOf(t, c, "10.0.0.2:80"); s.State != Down || !s.LastChange.Equal(was) {
			t.Errorf("restored down: %s changed %v", s.State, s.LastChange)
		}
		stop := run(t, c)
		// After b's first probe: one pass of two.
		waitProbes(f, "10.0.0.2:80", 1)
		if s := stateOf(t, c, "10.0.0.2:80"); s.State != Down || s.Passes != 1 {
			t.Errorf("restored down after one pass: %s, %d passes", s.State, s.Passes)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		changes := stop()
		if s := stateOf(t, c, "10.0.0.1:80"); s.State != Up {
			t.Errorf("restored up after two failures: %s", s.State)
		}
		var got []string
		for _, ch := range changes {
			got = append(got, ch.Key.Addr.String()+" "+ch.Old.String()+">"+ch.New.String())
		}
		want := []string{"10.0.0.2:80 down>up", "10.0.0.3:80 up>down"}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("changes %q, want %q", got, want)
		}
		if n := len(f.startsOf("10.0.0.9:80")); n != 0 {
			t.Errorf("a restored state that is no target was probed %d times", n)
		}
	})
}

func TestCheckerSetKeepsState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeProbes()
		f.set("10.0.0.2:80", fail)
		c := newChecker(f, 0)
		spec := Spec{Interval: "1s", Timeout: "500ms", Fall: 2}
		a, b, d := tcpTarget("10.0.0.1:80", spec), tcpTarget("10.0.0.2:80", spec), tcpTarget("10.0.0.3:80", spec)
		if err := c.Set([]Target{a, b}); err != nil {
			t.Fatal(err)
		}
		stop := run(t, c)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		before := stateOf(t, c, "10.0.0.2:80")
		if before.State != Down {
			t.Fatalf("b: %s, want down", before.State)
		}
		if err := c.Set([]Target{b, d}); err != nil {
			t.Fatal(err)
		}
		removedAt := time.Now()
		if s := stateOf(t, c, "10.0.0.2:80"); s.State != Down || s.Fails != before.Fails || s.LastChange != before.LastChange {
			t.Errorf("b after Set: %+v, want its state before: %+v", s, before)
		}
		snap := c.Snapshot()
		if len(snap.Targets) != 2 || snap.Targets[1].Key != d.Key() || snap.Targets[1].State != Unknown {
			t.Errorf("after Set: %+v, want b and a new unknown d", snap.Targets)
		}
		// b's schedule goes on: no probe of it comes early.
		bStarts := len(f.startsOf("10.0.0.2:80"))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		stop()
		for _, s := range f.startsOf("10.0.0.1:80") {
			if s.After(removedAt) {
				t.Errorf("a probed at %v, after Set removed it", s)
			}
		}
		s := f.startsOf("10.0.0.2:80")
		if len(s)-bStarts < 4 {
			t.Errorf("b probed %d times in 5s after Set", len(s)-bStarts)
		}
		for i := 1; i < len(s); i++ {
			if gap := s[i].Sub(s[i-1]); gap < 900*time.Millisecond {
				t.Errorf("b probes %s apart", gap)
			}
		}
		if err := c.Set([]Target{tcpTarget("10.0.0.1:80", Spec{Interval: "1x"})}); err == nil ||
			err.Error() != `tcp check of 10.0.0.1:80: interval: "1x": not a duration` {
			t.Errorf("Set with an interval of 1x: %v", err)
		}
		if err := c.Set([]Target{tcpTarget("10.0.0.1:80", Spec{Via: "vip"})}); err == nil ||
			err.Error() != "tcp check of 10.0.0.1:80: via vip: the target has no mark to reach its real server by" {
			t.Errorf("Set of a via-vip target without a mark: %v", err)
		}
		if n := len(c.Snapshot().Targets); n != 2 {
			t.Errorf("a refused Set left %d targets, want the 2 before", n)
		}
	})
}

// TestCheckerPrepareThenApply: Prepare refuses what Set refuses and
// changes nothing; the targets it returns are the checker's once applied.
func TestCheckerPrepareThenApply(t *testing.T) {
	c := newChecker(newFakeProbes(), 0)
	spec := Spec{Interval: "1s", Timeout: "500ms"}
	a, b := tcpTarget("10.0.0.1:80", spec), tcpTarget("10.0.0.2:80", spec)
	if err := c.Set([]Target{a}); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(1, func(int) Target { return tcpTarget("10.0.0.2:80", Spec{Interval: "1x"}) }); err == nil {
		t.Error("Prepare took an interval of 1x")
	}
	ts, err := Prepare(1, func(int) Target { return b })
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.State(b.Key()); ok {
		t.Error("b is a target before Apply")
	}
	c.Apply(ts)
	if _, ok := c.State(b.Key()); !ok {
		t.Error("b is not a target after Apply")
	}
	if _, ok := c.State(a.Key()); ok {
		t.Error("a is still a target after Apply")
	}
}

// TestCheckerSetWhileInFlight: a target removed while its probe runs and
// set again before that probe ends is a new target, probed once at a
// time.
func TestCheckerSetWhileInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeProbes()
		release := make(chan struct{})
		f.set("10.0.0.1:80", func(n int, ctx context.Context) error {
			if n == 3 {
				<-release // outlasts its timeout and interval
			}
			return nil
		})
		c := newChecker(f, 0)
		a := tcpTarget("10.0.0.1:80", Spec{Interval: "1s", Timeout: "500ms"})
		c.Set([]Target{a})
		stop := run(t, c)
		waitProbes(f, "10.0.0.1:80", 4)
		c.Set(nil)
		if n := len(c.Snapshot().Targets); n != 0 {
			t.Errorf("%d targets after Set(nil)", n)
		}
		c.Set([]Target{a})
		if s := stateOf(t, c, "10.0.0.1:80"); s.State != Unknown {
			t.Errorf("target set again: %s, want unknown", s.State)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := len(f.startsOf("10.0.0.1:80")); n != 4 {
			t.Errorf("%d probes, want 4: none beside the one in flight", n)
		}
		close(release)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		changes := stop()
		if f.maxRun[a.Addr] != 1 {
			t.Errorf("%d probes of one target at once", f.maxRun[a.Addr])
		}
		if s := stateOf(t, c, "10.0.0.1:80"); s.State != Up || s.Passes < 5 {
			t.Errorf("target set again: %s, %d passes after 5s of passes", s.State, s.Passes)
		}
		if len(changes) != 2 || changes[0].New != Up || changes[1].Old != Unknown || changes[1].New != Up {
			t.Errorf("changes %+v, want unknown>up twice", changes)
		}
	})
}

func TestCheckerDedupe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeProbes()
		c := newChecker(f, 0)
		a := tcpTarget("10.0.0.1:80", Spec{})
		a2 := tcpTarget("10.0.0.1:80", Spec{Interval: "2000ms", Rise: 2})
		a2.VIP = netip.MustParseAddrPort("192.0.2.1:80") // another service, same probe
		a3 := tcpTarget("10.0.0.1:8080", Spec{Port: 80}) // the same address once the port applies
		b := tcpTarget("10.0.0.1:80", Spec{Type: "http"})
		if a.Key() != a2.Key() || a.Key() != a3.Key() || a.Key() == b.Key() {
			t.Fatalf("keys: %+v %+v %+v %+v", a.Key(), a2.Key(), a3.Key(), b.Key())
		}
		e1 := Target{Addr: a.Addr, Spec: Spec{Type: "exec", Command: []string{"/bin/true"}}, VIP: netip.MustParseAddrPort("192.0.2.1:80")}
		e2 := e1
		e2.VIP = netip.MustParseAddrPort("192.0.2.2:80")
		if e1.Key() == e2.Key() {
			t.Error("exec targets of two services share a key: their environments differ")
		}
		if err := c.Set([]Target{a, a2, a3, b}); err != nil {
			t.Fatal(err)
		}
		snap := c.Snapshot()
		if len(snap.Targets) != 2 {
			t.Fatalf("%d targets, want 2: %+v", len(snap.Targets), snap.Targets)
		}
		stop := run(t, c)
		time.Sleep(20 * time.Second)
		synctest.Wait()
		stop()
		// One schedule at 2s for a, a2 and a3 (and b, on the same address).
		if n := len(f.startsOf("10.0.0.1:80")); n < 16 || n > 24 {
			t.Errorf("%d probes of 10.0.0.1:80 in 20s, want about 20 (two keys at 2s)", n)
		}
	})
}

// TestCheckerOneInFlight: a probe that outlasts its interval (ignoring
// its context) delays the next probe of its target, which starts late.
func TestCheckerOneInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeProbes()
		f.set("10.0.0.1:80", func(n int, ctx context.Context) error {
			if n == 1 {
				time.Sleep(3500 * time.Millisecond)
				return ctx.Err()
			}
			return nil
		})
		c := newChecker(f, 0)
		c.Set([]Target{tcpTarget("10.0.0.1:80", Spec{Interval: "1s", Timeout: "500ms", Fall: 1})})
		stop := run(t, c)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		onTime, healthy, late := c.OnTime(100*time.Millisecond), c.Healthy(), c.Lateness()
		changes := stop()
		s := f.startsOf("10.0.0.1:80")
		if f.maxRun[netip.MustParseAddrPort("10.0.0.1:80")] != 1 {
			t.Errorf("%d probes of one target at once", f.maxRun[netip.MustParseAddrPort("10.0.0.1:80")])
		}
		// The third probe starts as the second ends.
		if gap := s[2].Sub(s[1]); gap != 3500*time.Millisecond {
			t.Errorf("third probe %s after the second, want as it ends (3.5s)", gap)
		}
		if late.Max <= 0 || onTime || healthy {
			t.Errorf("after a late probe: lateness %+v, OnTime %v, Healthy %v; want late, not on time", late, onTime, healthy)
		}
		if len(changes) < 2 || changes[1].New != Down || changes[1].Result != "timeout after 500ms" {
			t.Errorf("changes %+v, want up, then down on a timeout", changes)
		}
	})
}

func TestCheckerMaxInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeProbes()
		c := newChecker(f, 3)
		var targets []Target
		for i := range 10 {
			addr := netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), uint16(1+i)).String()
			f.set(addr, func(n int, ctx context.Context) error {
				<-ctx.Done() // every probe times out
				return ctx.Err()
			})
			targets = append(targets, tcpTarget(addr, Spec{Interval: "2s", Timeout: "1500ms"}))
		}
		c.Set(targets)
		stop := run(t, c)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		st := c.Snapshot()
		stop()
		if f.maxAll != 3 {
			t.Errorf("%d probes at once, want MaxInFlight 3", f.maxAll)
		}
		if st.Lateness.Max == 0 || c.Healthy() {
			t.Errorf("10 probes of 1.5s every 2s, 3 at once: lateness %+v, healthy %v; want late", st.Lateness, c.Healthy())
		}
		for _, s := range st.Targets {
			if s.State != Down || s.Result != "timeout after 1.5s" {
				t.Errorf("%s: %s %q, want down on timeouts", s.Key.Addr, s.State, s.Result)
			}
		}
	})
}

// TestCheckerChangesMerge: changes a slow receiver has not taken merge
// per target.
func TestCheckerChangesMerge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeProbes()
		f.set("10.0.0.1:80", func(n int, ctx context.Context) error {
			if n%2 == 1 {
				return fail(n, ctx)
			}
			return nil
		})
		c := newChecker(f, 0)
		c.Set([]Target{tcpTarget("10.0.0.1:80", Spec{Interval: "1s", Timeout: "500ms", Rise: 1, Fall: 1})})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		time.Sleep(20500 * time.Millisecond)
		synctest.Wait()
		n := len(f.startsOf("10.0.0.1:80"))
		final := stateOf(t, c, "10.0.0.1:80").State
		// The first change waits in the sender; the flaps since merge.
		var got []Change
	receive:
		for {
			synctest.Wait() // the sender offers what it has
			select {
			case ch := <-c.Changes():
				got = append(got, ch)
			default:
				break receive
			}
		}
		cancel()
		<-done
		if _, open := <-c.Changes(); open {
			t.Error("Changes still open after Run returned")
		}
		if n < 18 {
			t.Fatalf("%d probes in 20s", n)
		}
		want := []State{Unknown, Up}
		if final == Down {
			want = append(want, Up, Down)
		}
		var states []State
		for _, ch := range got {
			states = append(states, ch.Old, ch.New)
		}
		if !slices.Equal(states, want) {
			t.Errorf("after %d flapping probes, ending %s: changes %+v, want %v", n, final, got, want)
		}
	})
}

func TestCheckerRunsOnce(t *testing.T) {
	c := New(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := c.Run(ctx); err == nil {
		t.Error("a second Run ran")
	}
}

// TestCheckerRealProbes runs the package's Probe against a listener and a
// closed port of this host, in real time: real sockets.
func TestCheckerRealProbes(t *testing.T) {
	up := listenTCP(t, "127.0.0.1")
	down := closedPort(t, "tcp", "127.0.0.1")
	c := New(Options{})
	spec := Spec{Type: "tcp", Interval: "100ms", Timeout: "50ms", Fall: 1}
	if err := c.Set([]Target{{Addr: up, Spec: spec}, {Addr: down, Spec: spec}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	got := map[netip.AddrPort]Change{}
	timeout := time.After(30 * time.Second) // a bound on a hung test
	for len(got) < 2 {
		select {
		case ch := <-c.Changes():
			got[ch.Key.Addr] = ch
		case <-timeout:
			t.Fatalf("changes after 30s: %+v", got)
		}
	}
	cancel()
	<-done
	if ch := got[up]; ch.New != Up || ch.Result != resultOK {
		t.Errorf("listener: %+v, want up", ch)
	}
	if ch := got[down]; ch.New != Down || ch.Result != "connect "+down.String()+": connection refused" {
		t.Errorf("closed port: %+v, want down, refused", ch)
	}
	// State gives what Snapshot does, less the target.
	for _, ts := range c.Snapshot().Targets {
		got, ok := c.State(ts.Key)
		ts.Target = Target{}
		if !ok || !reflect.DeepEqual(got, ts) {
			t.Errorf("State(%v) = %+v, %v; want %+v", ts.Key, got, ok, ts)
		}
	}
	if s, ok := c.State(TargetKey{Addr: netip.MustParseAddrPort("10.9.9.9:1")}); ok || s.State != Unknown {
		t.Errorf("State of no target: %+v, %v", s, ok)
	}
}

// TestCheckerObserve: Observe hears of every probe that ran, with its
// target and result.
func TestCheckerObserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeProbes()
		f.set("10.0.0.2:80", func(int, context.Context) error { return errors.New("connection refused") })
		var mu sync.Mutex
		seen := map[string][2]int{} // passes, failures
		c := New(Options{Probe: f.probe, Rand: rand.New(rand.NewPCG(1, 2)), Observe: func(tg Target, took time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			n := seen[tg.Addr.String()]
			if err == nil {
				n[0]++
			} else {
				n[1]++
			}
			seen[tg.Addr.String()] = n
		}})
		if err := c.Set([]Target{tcpTarget("10.0.0.1:80", Spec{}), tcpTarget("10.0.0.2:80", Spec{})}); err != nil {
			t.Fatal(err)
		}
		stop := run(t, c)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		stop()
		mu.Lock()
		defer mu.Unlock()
		up, down := seen["10.0.0.1:80"], seen["10.0.0.2:80"]
		if up[0] != len(f.startsOf("10.0.0.1:80")) || up[1] != 0 || down[1] != len(f.startsOf("10.0.0.2:80")) || down[0] != 0 || up[0] < 4 {
			t.Errorf("observed %v, probes started %d and %d", seen, len(f.startsOf("10.0.0.1:80")), len(f.startsOf("10.0.0.2:80")))
		}
	})
}

// A hold starts no probe until Release, or half the shortest interval
// has passed; the probes it delayed start at its end and count late from
// there only.
func TestCheckerHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeProbes()
		c := newChecker(f, 0)
		targets, addrs := fiftyTargets() // every 2 s
		if err := c.Set(targets); err != nil {
			t.Fatal(err)
		}
		count := func() int {
			n := 0
			for _, a := range addrs {
				n += len(f.startsOf(a))
			}
			return n
		}
		stop := run(t, c)
		defer stop()
		c.Hold()
		time.Sleep(900 * time.Millisecond)
		synctest.Wait()
		if n := count(); n != 0 {
			t.Fatalf("%d probes started during a hold", n)
		}
		released := time.Now()
		c.Release()
		synctest.Wait()
		if n := count(); n < 10 {
			t.Errorf("%d probes started at the release, want the ~22 due in 900 ms", n)
		}
		for _, a := range addrs {
			if s := f.startsOf(a); len(s) > 0 && s[0].Before(released) {
				t.Errorf("%s probed at %v, before the release at %v", a, s[0], released)
			}
		}
		if l := c.Lateness(); l.Max != 0 {
			t.Errorf("lateness %+v: probes a hold delayed counted late", l)
		}

		// Unreleased, a hold ends after half the interval.
		c.Hold()
		before := count()
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if n := count(); n != before {
			t.Errorf("%d probes started during the second hold", n-before)
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if n := count(); n == before {
			t.Error("no probe started once the hold ran out")
		}
	})
}

// The checker keeps a target less its spec, and gives it back whole.
func TestCheckerGivesTargetsBackWhole(t *testing.T) {
	tg := Target{Addr: netip.MustParseAddrPort("10.0.0.1:80"), Mark: 7, Through: netip.MustParseAddr("192.168.1.1"),
		VIP: netip.MustParseAddrPort("10.0.0.1:80"), Env: map[string]string{"A": "b"}, Spec: Spec{Type: "tcp", Interval: "2s", Port: 81}}
	v := reflect.ValueOf(tg)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the sample target leaves %s zero: give it a value, and keep it in place", v.Type().Field(i).Name)
		}
	}
	c := New(Options{})
	if err := c.Set([]Target{tg}); err != nil {
		t.Fatal(err)
	}
	if got := c.Snapshot().Targets; len(got) != 1 || !reflect.DeepEqual(got[0].Target, tg) {
		t.Errorf("snapshot target %+v, want %+v", got, tg)
	}
}

// TestCheckerTakesSoonWithDue: the scheduler starts the probes due and
// those due within maxEarly, up to a hundredth of the shortest interval,
// and no more than maxBatch at once.
func TestCheckerTakesSoonWithDue(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		ivl  string
		want int
	}{{"2s", 4}, {"500ms", 3}} { // early by 10 ms, by 5 ms
		ck := New(Options{})
		var ts []Target
		for i := range 5 {
			ts = append(ts, Target{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 80), Spec: Spec{Type: "tcp", Interval: c.ivl}})
		}
		if err := ck.Set(ts); err != nil {
			t.Fatal(err)
		}
		// Due a second ago, now, in 4 ms, in 9 ms and in 11 ms.
		for i, d := range []time.Duration{-time.Second, 0, 4 * time.Millisecond, 9 * time.Millisecond, 11 * time.Millisecond} {
			e := ck.entries[ts[i].Key()]
			e.next = now.Add(d)
			ck.queue.fix(e)
		}
		if got := len(ck.takeDue(now, nil)); got != c.want || ck.inFlight != c.want {
			t.Errorf("interval %s: took %d (in flight %d), want %d", c.ivl, got, ck.inFlight, c.want)
		}
	}
	ck := New(Options{})
	var ts []Target
	for i := range maxBatch + 10 {
		ts = append(ts, Target{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i / 250), byte(i%250 + 1)}), 80), Spec: Spec{Type: "tcp", Interval: "2s"}})
	}
	if err := ck.Set(ts); err != nil {
		t.Fatal(err)
	}
	if got := len(ck.takeDue(now.Add(time.Hour), nil)); got != maxBatch {
		t.Errorf("took %d, want at most %d", got, maxBatch)
	}
}
