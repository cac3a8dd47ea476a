package lvsctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"github.com/lvskit/lvskit/lvsctl/record"
	"github.com/lvskit/lvskit/rules"
)

// lockedClient lets a test read the fake while lvsctl run changes it.
type lockedClient struct {
	mu *sync.Mutex
	f  *ipvstest.Fake
	// watch, when it holds a function, is shown the table after each
	// change, under mu (see watchTable).
	watch *func(map[string]uint32)
}

func (c lockedClient) lock() func() { c.mu.Lock(); return c.mu.Unlock }

// changed shows the table to the watcher, if any; mu is held.
func (c lockedClient) changed() {
	if c.watch == nil || *c.watch == nil {
		return
	}
	if set, err := rules.Read(c.f); err == nil {
		(*c.watch)(weightsOf(set))
	}
}

// watchTable has each change of the table, by anyone, checked by ok until
// the returned function is called; the first table ok refuses fails the
// test.
func (c lockedClient) watchTable(t *testing.T, what string, ok func(map[string]uint32) bool) (stop func()) {
	t.Helper()
	failed := false
	c.mu.Lock()
	*c.watch = func(w map[string]uint32) {
		if !failed && !ok(w) {
			failed = true
			t.Errorf("%s: the table went through %v", what, w)
		}
	}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		*c.watch = nil
		c.mu.Unlock()
	}
}

func (c lockedClient) Info() (ipvs.Info, error) { defer c.lock()(); return c.f.Info() }
func (c lockedClient) Services() ([]ipvs.ServiceEntry, error) {
	defer c.lock()()
	return c.f.Services()
}
func (c lockedClient) Service(k ipvs.Service) (ipvs.ServiceEntry, error) {
	defer c.lock()()
	return c.f.Service(k)
}
func (c lockedClient) Destinations(s ipvs.Service) ([]ipvs.DestinationEntry, error) {
	defer c.lock()()
	return c.f.Destinations(s)
}
func (c lockedClient) Timeouts() (ipvs.Timeouts, error) { defer c.lock()(); return c.f.Timeouts() }
func (c lockedClient) Daemons() ([]ipvs.Daemon, error)  { defer c.lock()(); return c.f.Daemons() }
func (c lockedClient) Exec(r ipvs.Request) error {
	defer c.lock()()
	defer c.changed()
	return c.f.Exec(r)
}
func (c lockedClient) Close() error                 { return nil }
func (c lockedClient) Pipeline(w int) ipvs.Pipeline { return lockedPipe{c, c.f.Pipeline(w)} }

type lockedPipe struct {
	c lockedClient
	p ipvs.Pipeline
}

func (p lockedPipe) Submit(r ipvs.Request, done func(error)) error {
	defer p.c.lock()()
	defer p.c.changed()
	return p.p.Submit(r, done)
}
func (p lockedPipe) Flush() error { defer p.c.lock()(); defer p.c.changed(); return p.p.Flush() }

// weights reads the real servers' weights of the table, by name.
func (c lockedClient) weights(t *testing.T) map[string]uint32 {
	t.Helper()
	set, err := rules.Read(c)
	if err != nil {
		t.Fatal(err)
	}
	return weightsOf(set)
}

func weightsOf(set *rules.Set) map[string]uint32 {
	out := map[string]uint32{}
	for _, s := range set.Services {
		for _, d := range s.Dests {
			out[rules.KeyOf(&s.Service).String()+" -r "+rules.DestKeyOf(&d.Destination).String()] = d.Weight
		}
	}
	return out
}

// fakeProbes answers probes from a table of failing addresses, and of
// weights that passing ones give (as a dynamic exec check does).
type fakeProbes struct {
	mu     sync.Mutex
	down   map[string]bool
	weight map[string]uint32
	runs   map[string]int // probes run, by address
	ran    chan struct{}  // told of a probe run (nil: nobody listens)
}

// setWeight makes addr's probes pass with weight w; clearWeight makes
// them plain passes again.
func (p *fakeProbes) setWeight(addr string, w uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.weight == nil {
		p.weight = map[string]uint32{}
	}
	p.weight[addr] = w
}

func (p *fakeProbes) clearWeight(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.weight, addr)
}

// reached reports whether each address of want had its count of probes.
func (p *fakeProbes) reached(want map[string]int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, n := range want {
		if p.runs[a] < n {
			return false
		}
	}
	return true
}

func (p *fakeProbes) count(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs[addr]
}

func (p *fakeProbes) set(addr string, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down[addr] = down
}

func (p *fakeProbes) probe(ctx context.Context, t health.Target) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	addr := t.Addr
	if t.Through.IsValid() { // via the VIP: the real server answers
		addr = netip.AddrPortFrom(t.Through, t.Addr.Port())
	}
	// A check's own port: its probes count under that address, and fail
	// as it is set to, else as the real server's address is.
	fails := p.down[addr.String()]
	if t.Spec.Port > 0 && t.Spec.Type != "exec" {
		addr = netip.AddrPortFrom(addr.Addr(), uint16(t.Spec.Port))
		if down, ok := p.down[addr.String()]; ok {
			fails = down
		}
	}
	if p.runs == nil {
		p.runs = map[string]int{}
	}
	p.runs[addr.String()]++
	if p.ran != nil {
		select {
		case p.ran <- struct{}{}:
		default: // the listener has been told already
		}
	}
	if fails {
		return errors.New("connection refused")
	}
	if w, ok := p.weight[addr.String()]; ok {
		return &health.WeightResult{Weight: w}
	}
	return nil
}

const runYAML = `version: 2
services:
  - protocol: tcp
    address: 10.0.0.1
    port: 80
    scheduler: wrr
    check: {type: tcp, interval: 200ms, timeout: 100ms, rise: 2, fall: 2}
    destinations:
      - {address: 192.168.1.1, port: 80, method: masq, weight: 3}
      - {address: 192.168.1.2, port: 80, method: masq, weight: 1}
`

// runFixture is an empty fake kernel, its environment and runYAML in a file.
func runFixture(t *testing.T) (*ipvstest.Fake, Env, string) {
	t.Helper()
	f := ipvstest.New()
	file := filepath.Join(t.TempDir(), "director.yaml")
	if err := os.WriteFile(file, []byte(runYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	return f, testEnv(t, f), file
}

// runHarness runs lvsctl run on a fake kernel in the background.
//
// The tests of run, but TestRunMetrics, run in synctest bubbles: time is
// fake, and passes only while every goroutine of the bubble waits, so a
// test waits for exactly what it means to (probed: a number of probes,
// then run's reaction to them) and then looks at the table, which no
// other goroutine is changing. Their files check every 200 ms (runYAML's
// interval, unless a test says otherwise).
type runHarness struct {
	c      lockedClient
	probes *fakeProbes
	reload chan os.Signal
	ready  chan string
	cancel func()
	done   chan struct{} // closed when run has ended, with res
	res    result
	file   string
	stderr syncBuffer
}

// startRun starts run, the probes of down failing from the first.
func startRun(t testing.TB, f *ipvstest.Fake, file string, env Env, down ...string) *runHarness {
	t.Helper()
	return startRunDown(t, f, env, down, "--drain-timeout", "0", file)
}

func startRunArgs(t testing.TB, f *ipvstest.Fake, env Env, args ...string) *runHarness {
	t.Helper()
	return startRunDown(t, f, env, nil, args...)
}

func startRunDown(t testing.TB, f *ipvstest.Fake, env Env, down []string, args ...string) *runHarness {
	t.Helper()
	file := args[len(args)-1]
	h := &runHarness{c: lockedClient{mu: &sync.Mutex{}, f: f, watch: new(func(map[string]uint32))},
		probes: &fakeProbes{down: map[string]bool{}, ran: make(chan struct{}, 1)},
		reload: make(chan os.Signal, 1), ready: make(chan string, 100), done: make(chan struct{}), file: file}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	for _, a := range down {
		h.probes.down[a] = true
	}
	env.Open = func() (ipvs.Client, error) { return h.c, nil }
	env.Context, env.Reload, env.Probe = ctx, h.reload, h.probes.probe
	env.Notify = func(s string) { h.ready <- s }
	var out syncBuffer
	go func() {
		code := Main(append([]string{"lvsctl", "run"}, args...), nil, &out, &h.stderr, env)
		h.res = result{code, out.String(), h.stderr.String()}
		close(h.done)
	}()
	// run ends with the test, failed or not: a synctest bubble ends only
	// once its goroutines have.
	t.Cleanup(func() { h.stop(t) })
	select {
	case s := <-h.ready:
		if !strings.HasPrefix(s, "READY=1") {
			t.Fatalf("first notification %q", s)
		}
	case <-h.done:
		t.Fatalf("run ended before it was ready: %+v", h.res)
	case <-time.After(10 * time.Second):
		t.Fatal("run not ready after 10 s")
	}
	return h
}

// stop ends run, if it still runs, and returns how it ended.
func (h *runHarness) stop(t testing.TB) result {
	t.Helper()
	h.cancel()
	select {
	case <-h.done:
		return h.res
	case <-time.After(10 * time.Second):
		t.Fatal("run did not stop")
	}
	return result{}
}

// settled is how long run takes to act on a change of health: its settle
// (50 ms), and less than the time to the next probe (the interval less
// 10 %: 180 ms at runYAML's 200 ms).
const settled = 100 * time.Millisecond

// probed waits, in a synctest bubble, until each of addrs had n more
// probes, then for run to act on what they found (settled).
func (h *runHarness) probed(t *testing.T, n int, addrs ...string) {
	t.Helper()
	synctest.Wait()
	want := make(map[string]int, len(addrs))
	for _, a := range addrs {
		want[a] = h.probes.count(a) + n
	}
	h.waitProbes(t, want)
}

// probedSinceStart is probed for n probes of each of addrs since run
// started, the first of which may have come at its start.
func (h *runHarness) probedSinceStart(t *testing.T, n int, addrs ...string) {
	t.Helper()
	want := make(map[string]int, len(addrs))
	for _, a := range addrs {
		want[a] = n
	}
	h.waitProbes(t, want)
}

// waitProbes waits until each address of want had its count of probes,
// then settled.
func (h *runHarness) waitProbes(t *testing.T, want map[string]int) {
	t.Helper()
	timeout := time.After(time.Minute) // a bound on a hung test, in fake time
	for !h.probes.reached(want) {
		select {
		case <-h.probes.ran:
		case <-timeout:
			t.Fatalf("probes of %v in a minute: not %v", slices.Collect(maps.Keys(want)), want)
		}
	}
	time.Sleep(settled)
	synctest.Wait()
}

// expect fails the test unless the table is as cond says.
func (h *runHarness) expect(t *testing.T, what string, cond func(map[string]uint32) bool) {
	t.Helper()
	if w := h.c.weights(t); !cond(w) {
		t.Fatalf("%s: the table has %v", what, w)
	}
}

// waitFor polls the table until cond holds (10 s at most), on the real
// clock.
func (h *runHarness) waitFor(t *testing.T, what string, cond func(map[string]uint32) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w := h.c.weights(t)
		if cond(w) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the table still has %v", what, w)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const (
	rs1 = "-t 10.0.0.1:80 -r 192.168.1.1:80"
	rs2 = "-t 10.0.0.1:80 -r 192.168.1.2:80"
	rs3 = "-t 10.0.0.1:80 -r 192.168.1.3:80"
	// the addresses their probes go to
	ip1 = "192.168.1.1:80"
	ip2 = "192.168.1.2:80"
	ip3 = "192.168.1.3:80"
)

// TestRunTakesFailedServersOutAndBack: a real server that fails its check
// goes to weight 0 (never deleted) and gets its weight back after rise
// passes; a reload keeps the health of the servers that stay; when every
// real server fails, the last ones stay in service (fail open) and the log
// says so; SIGTERM leaves the table as it is.
func TestRunTakesFailedServersOutAndBack(t *testing.T) {
	synctest.Test(t, testRunTakesFailedServersOutAndBack)
}

func testRunTakesFailedServersOutAndBack(t *testing.T) {
	f, env, file := runFixture(t)
	h := startRun(t, f, file, env)
	// A fresh table: the servers serve after their first passing check.
	h.probedSinceStart(t, 1, ip1, ip2)
	h.expect(t, "first passes", func(w map[string]uint32) bool { return w[rs1] == 3 && w[rs2] == 1 })
	if log := h.stderr.String(); strings.Contains(log, "FAILED") {
		t.Errorf("servers waiting for their first check reported as failed:\n%s", log)
	}

	// fall 2 and rise 2: one probe is not enough either way.
	h.probes.set(ip2, true)
	h.probed(t, 1, ip2)
	h.expect(t, "rs2 failed once", func(w map[string]uint32) bool { return w[rs2] == 1 && w[rs1] == 3 })
	h.probed(t, 1, ip2)
	h.expect(t, "rs2 failing", func(w map[string]uint32) bool { _, ok := w[rs2]; return ok && w[rs2] == 0 && w[rs1] == 3 })
	h.probes.set(ip2, false)
	h.probed(t, 1, ip2)
	h.expect(t, "rs2 passed once", func(w map[string]uint32) bool { return w[rs2] == 0 })
	h.probed(t, 1, ip2)
	h.expect(t, "rs2 back", func(w map[string]uint32) bool { return w[rs2] == 1 })

	// Reload with rs1's weight changed and a third server: rs2 goes down
	// first and must stay down across the reload.
	h.probes.set(ip2, true)
	h.probed(t, 2, ip2)
	h.expect(t, "rs2 failing again", func(w map[string]uint32) bool { return w[rs2] == 0 })
	changed := strings.Replace(runYAML, "weight: 3}", "weight: 5}", 1) +
		"      - {address: 192.168.1.3, port: 80, method: masq, weight: 2}\n"
	if err := os.WriteFile(file, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	h.reload <- os.Interrupt
	h.probedSinceStart(t, 1, ip3) // the new server serves after its first passing check
	h.expect(t, "reload", func(w map[string]uint32) bool { return w[rs1] == 5 && w[rs2] == 0 && w[rs3] == 2 })

	// Every server fails: the ones in service stay (fail open).
	for _, a := range []string{ip1, ip3} {
		h.probes.set(a, true)
	}
	h.probed(t, 2, ip1, ip3)
	// The last to fail stays in service (both, if they failed together).
	h.expect(t, "all down, fail open", func(w map[string]uint32) bool { return (w[rs1] == 5 || w[rs3] == 2) && w[rs2] == 0 })
	before := h.c.weights(t)
	r := h.stop(t)
	if r.code != exitOK || !strings.Contains(r.stderr, "ALL REAL SERVERS OF -t 10.0.0.1:80 FAILED THEIR CHECKS: when_all_down keep") {
		t.Errorf("run: %+v", r)
	}
	if after := h.c.weights(t); len(after) != len(before) || after[rs1] != before[rs1] {
		t.Errorf("the table changed when run stopped: %v, was %v", after, before)
	}
}

// TestRunDynamicWeight: a real server whose check passes with a weight
// serves at that weight, follows its changes while up, goes to weight 0
// when it fails and comes back at the weight of the pass that brings it
// back; a plain pass puts it back at the file's weight. The log says so.
func TestRunDynamicWeight(t *testing.T) { synctest.Test(t, testRunDynamicWeight) }

func testRunDynamicWeight(t *testing.T) {
	f, env, file := runFixture(t)
	h := startRun(t, f, file, env)
	h.probedSinceStart(t, 1, ip1, ip2)
	h.expect(t, "first passes", func(w map[string]uint32) bool { return w[rs1] == 3 && w[rs2] == 1 })

	h.probes.setWeight(ip1, 8)
	h.probed(t, 1, ip1)
	h.expect(t, "weight 8", func(w map[string]uint32) bool { return w[rs1] == 8 && w[rs2] == 1 })
	h.probes.setWeight(ip1, 0)
	h.probed(t, 1, ip1)
	h.expect(t, "weight 0, in service", func(w map[string]uint32) bool { r, ok := w[rs1]; return ok && r == 0 })
	h.probes.set(ip1, true)
	h.probes.setWeight(ip1, 6)
	h.probed(t, 1, ip1)
	if strings.Contains(h.stderr.String(), rs1+" up -> down") {
		t.Fatalf("rs1 down after one failure, fall 2:\n%s", h.stderr.String())
	}
	h.probed(t, 1, ip1)
	h.expect(t, "down", func(w map[string]uint32) bool { return w[rs1] == 0 })
	if !strings.Contains(h.stderr.String(), rs1+" up -> down") {
		t.Fatalf("rs1 not down after two failures, fall 2:\n%s", h.stderr.String())
	}
	h.probes.set(ip1, false)
	h.probed(t, 2, ip1)
	h.expect(t, "back at 6", func(w map[string]uint32) bool { return w[rs1] == 6 })
	h.probes.clearWeight(ip1)
	h.probed(t, 1, ip1)
	h.expect(t, "the file's weight", func(w map[string]uint32) bool { return w[rs1] == 3 })
	r := h.stop(t)
	for _, line := range []string{rs1 + " up -> up (tcp check: ok, weight 8)", rs1 + " up -> up (tcp check: ok, the file's weight)"} {
		if !strings.Contains(r.stderr, line) {
			t.Errorf("log without %q:\n%s", line, r.stderr)
		}
	}
}

// TestRunReloadOfAFewServices: a reload that changes a few services of
// many puts them in the kernel before the rest of the table is worked out
// again; on the way, no server that failed comes back, no server that
// left is deleted instead of drained, and the services the file did not
// change are not touched.
func TestRunReloadOfAFewServices(t *testing.T) { synctest.Test(t, testRunReloadOfAFewServices) }

func testRunReloadOfAFewServices(t *testing.T) {
	f := ipvstest.New()
	svc := func(i int, dests ...string) string {
		s := fmt.Sprintf("  - {protocol: tcp, address: 10.0.0.%d, port: 80, scheduler: wrr,\n"+
			"     check: {type: tcp, interval: 200ms, timeout: 100ms, rise: 2, fall: 2},\n     destinations: [\n", i)
		for _, d := range dests {
			s += "       " + d + ",\n"
		}
		return s + "     ]}\n"
	}
	dest := func(i, k, w int) string {
		return fmt.Sprintf("{address: 192.168.%d.%d, port: 80, method: masq, weight: %d}", i, k, w)
	}
	doc := func(reloaded bool) string {
		b := "version: 2\nservices:\n"
		for i := 1; i <= 8; i++ {
			ds := []string{dest(i, 1, 3), dest(i, 2, 1)}
			switch {
			case reloaded && i == 1:
				ds[0] = dest(i, 1, 5)
			case reloaded && i == 2:
				ds = append(ds, dest(i, 3, 2))
			case reloaded && i == 3:
				ds = ds[:1]
			}
			b += svc(i, ds...)
		}
		return b
	}
	file := filepath.Join(t.TempDir(), "director.yaml")
	if err := os.WriteFile(file, []byte(doc(false)), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startRunArgs(t, f, testEnv(t, f), "--drain-timeout", "1h", file)
	defer h.stop(t)
	h.probedSinceStart(t, 1, ip1, ip2)
	h.expect(t, "first passes", func(w map[string]uint32) bool { return len(w) == 16 && w[rs1] == 3 && w[rs2] == 1 })
	h.probes.set(ip2, true)
	h.probed(t, 2, ip2)
	h.expect(t, "rs2 failing", func(w map[string]uint32) bool { return w[rs2] == 0 })
	// By hand, in a service the reload leaves as it is: the reload must
	// not read or change it (the next resync puts it back).
	const untouched = "-t 10.0.0.8:80 -r 192.168.8.1:80"
	s8 := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.0.0.8"), Port: 80}
	d8 := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.MustParseAddr("192.168.8.1"), Port: 80, FwdMethod: ipvs.FwdMasq, Weight: 9}
	if err := h.c.Exec(ipvs.Request{Cmd: ipvs.CmdSetDest, Service: &s8, Dest: &d8}); err != nil {
		t.Fatal(err)
	}

	// The server that leaves has a connection: its drain lasts until the
	// deadline, not only until the next poll of its connections, which a
	// loaded host could let pass before the table is looked at.
	s3 := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.0.0.3"), Port: 80}
	d3 := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.MustParseAddr("192.168.3.2"), Port: 80}
	h.c.mu.Lock()
	err := f.SetDestinationCounters(s3, d3, ipvs.DestCounters{ActiveConns: 1})
	h.c.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}

	before := len(h.stderr.String())
	if err := os.WriteFile(file, []byte(doc(true)), 0o600); err != nil {
		t.Fatal(err)
	}
	h.reload <- os.Interrupt
	const added, left = "-t 10.0.0.2:80 -r 192.168.2.3:80", "-t 10.0.0.3:80 -r 192.168.3.2:80"
	h.probedSinceStart(t, 1, "192.168.2.3:80") // the added server serves after its first passing check
	h.expect(t, "reload", func(w map[string]uint32) bool {
		in, ok := w[left]
		return w[rs1] == 5 && w[rs2] == 0 && w[added] == 2 && ok && in == 0
	})
	if w := h.c.weights(t); w[untouched] != 9 {
		t.Errorf("the reload changed %s, which the file did not: weight %d, want 9", untouched, w[untouched])
	}
	log := h.stderr.String()[before:]
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "delete-dest") || strings.Contains(l, "192.168.1.2:80") {
			t.Errorf("the reload deleted a server that left, or changed one that failed: %q", l)
		}
	}
	if n := strings.Count(log, "lvsctl run: reload: "); n != 1 {
		t.Errorf("the reload's plan is logged %d times, want once:\n%s", n, log)
	}
}

// TestRunRestartKeepsHealth: a restarted run starts from its record: a
// server that was out stays out until it passes rise checks, and one in
// service stays in service.
func TestRunRestartKeepsHealth(t *testing.T) { synctest.Test(t, testRunRestartKeepsHealth) }

func testRunRestartKeepsHealth(t *testing.T) {
	f, env, file := runFixture(t)
	h := startRun(t, f, file, env, ip2)
	h.probedSinceStart(t, 1, ip1)
	h.probedSinceStart(t, 2, ip2) // down after fall (2) failures
	h.expect(t, "rs1 in, rs2 out", func(w map[string]uint32) bool { return w[rs1] == 3 && w[rs2] == 0 })
	h.stop(t)

	// The second run's probes all pass, but rs2 needs rise (2) passes:
	// its first reconcile must keep it at 0, and rs1 must never leave.
	h2 := startRun(t, f, file, env)
	if w := h2.c.weights(t); w[rs2] != 0 || w[rs1] != 3 {
		t.Errorf("right after the restart: %v; want rs2 still out and rs1 in", w)
	}
	h2.probedSinceStart(t, 1, ip2)
	h2.expect(t, "rs2 after one pass", func(w map[string]uint32) bool { return w[rs2] == 0 && w[rs1] == 3 })
	h2.probed(t, 1, ip2)
	h2.expect(t, "rs2 back after rise", func(w map[string]uint32) bool { return w[rs2] == 1 && w[rs1] == 3 })
	h2.stop(t)
}

// TestManualCommandsSeeTheRun: while run keeps the table, plan shows a
// server its check holds out as held, not as drift, and apply of another
// file is refused with what to do instead.
func TestManualCommandsSeeTheRun(t *testing.T) { synctest.Test(t, testManualCommandsSeeTheRun) }

func testManualCommandsSeeTheRun(t *testing.T) {
	f, env, file := runFixture(t)
	h := startRun(t, f, file, env)
	defer h.stop(t)
	h.probes.set(ip2, true)
	h.probed(t, 2, ip2) // run has changed the table and written its record
	h.expect(t, "rs2 out", func(w map[string]uint32) bool { return w[rs1] == 3 && w[rs2] == 0 })

	env.Open = func() (ipvs.Client, error) { return h.c, nil }
	p := run(t, env, runYAML, "plan", "-")
	if p.code != exitOK || !strings.Contains(p.stdout, "held: "+rs2+" is out of service by lvsctl run's check (") {
		t.Errorf("plan during a run: %+v", p)
	}
	other := filepath.Join(t.TempDir(), "other.rules")
	if err := os.WriteFile(other, []byte("-A -t 10.0.0.1:80 -s wrr\n-a -t 10.0.0.1:80 -r 192.168.1.1:80 -m -w 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := run(t, env, "", "apply", other)
	if a.code != exitFailed || !strings.Contains(a.stderr, "keeps this table as "+file+" says") {
		t.Errorf("apply of another file during a run: %+v", a)
	}
	if w := h.c.weights(t); w[rs2] != 0 || len(w) != 2 {
		t.Errorf("the manual commands changed the table: %v", w)
	}
}

// TestStatusShowsTheChecks: status (text and JSON) shows each checked
// real server's health and whether it serves.
func TestStatusShowsTheChecks(t *testing.T) { synctest.Test(t, testStatusShowsTheChecks) }

func testStatusShowsTheChecks(t *testing.T) {
	f, env, file := runFixture(t)
	h := startRun(t, f, file, env)
	defer h.stop(t)
	h.probes.set(ip2, true)
	h.probed(t, 2, ip1, ip2) // run has changed the table and written its record
	h.expect(t, "rs1 in", func(w map[string]uint32) bool { return w[rs1] == 3 && w[rs2] == 0 })
	s := run(t, env, "", "status")
	if !strings.Contains(s.stdout, "| 192.168.1.2:80 | held out   | 0 (file 1) | down ") || !strings.Contains(s.stdout, "| 192.168.1.1:80 | in service | 3          | up ") {
		t.Fatalf("status does not show rs2 held out and down: %+v", s)
	}
	if !strings.Contains(s.stdout, "lvsctl run: pid ") || !strings.Contains(s.stdout, "connection refused") {
		t.Errorf("status: %+v", s)
	}
	js := run(t, env, "", "status", "--json")
	var doc jsonStatus
	if err := json.Unmarshal([]byte(js.stdout), &doc); err != nil || doc.Run == nil || !doc.Run.Running || len(doc.Run.Servers) != 2 {
		t.Fatalf("status --json: %v %+v", err, js)
	}
	for _, s := range doc.Run.Servers {
		if s.Service != "-t 10.0.0.1:80" || s.Check != "tcp" || (s.Destination == "192.168.1.2:80") == s.InService || (s.Weight == 0) == s.InService {
			t.Errorf("server %+v", s)
		}
	}
}

// TestRunMetrics: --metrics-listen serves each real server's counters,
// weights and check state, and the output passes Prometheus' lint (what
// promtool check metrics runs). It stays on the real clock: the metrics
// are read over a real HTTP connection.
func TestRunMetrics(t *testing.T) {
	f, env, file := runFixture(t)
	h := startRunArgs(t, f, env, "--metrics-listen", "127.0.0.1:0", file)
	defer h.stop(t)
	h.probes.set("192.168.1.2:80", true)
	h.waitFor(t, "rs1 in", func(w map[string]uint32) bool { return w[rs1] == 3 })
	addr := ""
	deadline := time.Now().Add(5 * time.Second)
	for addr == "" && time.Now().Before(deadline) {
		if _, rest, ok := strings.Cut(h.stderr.String(), "metrics at http://"); ok {
			addr, _, _ = strings.Cut(rest, "/metrics")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var body string
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		if strings.Contains(body, `lvs_real_server_check_up{real_server="192.168.1.2:80",service="-t 10.0.0.1:80"} 0`) &&
			strings.Contains(body, `lvs_real_server_check_up{real_server="192.168.1.1:80",service="-t 10.0.0.1:80"} 1`) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{
		`lvs_real_server_weight{kind="configured",real_server="192.168.1.2:80",service="-t 10.0.0.1:80"} 1`,
		`lvs_real_server_weight{kind="current",real_server="192.168.1.2:80",service="-t 10.0.0.1:80"} 0`,
		`lvs_real_server_check_up{real_server="192.168.1.1:80",service="-t 10.0.0.1:80"} 1`,
		`lvs_real_server_packets_total{direction="in",real_server="192.168.1.1:80",service="-t 10.0.0.1:80"} 0`,
		`lvs_probe_duration_seconds_count{type="tcp"}`,
		`lvs_checker_on_time 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

// TestRunRefusesABadRecord: a corrupt record, or one another user could
// have written, is refused with a clear error, and the kernel's weights
// are kept.
func TestRunRefusesABadRecord(t *testing.T) {
	f, env, file := runFixture(t)
	if r := run(t, env, runYAML, "apply", "--drain-timeout", "0", "-"); r.code != exitOK {
		t.Fatalf("seeding: %+v", r)
	}
	c := lockedClient{mu: &sync.Mutex{}, f: f}
	before := c.weights(t)
	if err := os.MkdirAll(env.JournalDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, setup := range map[string]func(p string) error{
		"corrupt": func(p string) error { return os.WriteFile(p, []byte("{not json"), 0o600) },
		"writable by others": func(p string) error {
			if err := os.WriteFile(p, []byte("{}"), 0o600); err != nil {
				return err
			}
			return os.Chmod(p, 0o666)
		},
	} {
		p := filepath.Join(env.JournalDir, record.RunName)
		os.Remove(p)
		if err := setup(p); err != nil {
			t.Fatal(err)
		}
		env.Open = func() (ipvs.Client, error) { return c, nil }
		var out, errb strings.Builder
		code := Main([]string{"lvsctl", "run", file}, nil, &out, &errb, env)
		if code != exitFailed || !strings.Contains(errb.String(), record.RunName) || !strings.Contains(errb.String(), "the kernel's weights are kept") {
			t.Errorf("%s record: status %d, stderr %q", name, code, errb.String())
		}
		if after := c.weights(t); len(after) != len(before) || after[rs1] != before[rs1] || after[rs2] != before[rs2] {
			t.Errorf("%s record: the table changed: %v, was %v", name, after, before)
		}
	}
}

// TestRunHealthChangeReadsItsServiceOnly: a health change reads and
// changes its own service alone; a weight someone else set in another
// service stays until a resync, which reads the whole table.
func TestRunHealthChangeReadsItsServiceOnly(t *testing.T) {
	synctest.Test(t, testRunHealthChangeReadsItsServiceOnly)
}

func testRunHealthChangeReadsItsServiceOnly(t *testing.T) {
	f, env, file := runFixture(t)
	two := runYAML + `  - protocol: tcp
    address: 10.0.0.2
    port: 80
    scheduler: wrr
    check: {type: tcp, interval: 200ms, timeout: 100ms, rise: 2, fall: 2}
    destinations:
      - {address: 192.168.2.1, port: 80, method: masq, weight: 4}
`
	if err := os.WriteFile(file, []byte(two), 0o600); err != nil {
		t.Fatal(err)
	}
	const other = "-t 10.0.0.2:80 -r 192.168.2.1:80"
	h := startRun(t, f, file, env)
	h.probedSinceStart(t, 1, ip1, ip2, "192.168.2.1:80")
	h.expect(t, "first passes", func(w map[string]uint32) bool { return w[rs1] == 3 && w[rs2] == 1 && w[other] == 4 })

	svc := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.0.0.2"), Port: 80}
	d := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.MustParseAddr("192.168.2.1"), Port: 80, FwdMethod: ipvs.FwdMasq, Weight: 9}
	if err := h.c.Exec(ipvs.Request{Cmd: ipvs.CmdSetDest, Service: &svc, Dest: &d}); err != nil {
		t.Fatal(err)
	}
	h.probes.set(ip2, true)
	h.probed(t, 2, ip2)
	h.expect(t, "rs2 failing", func(w map[string]uint32) bool { return w[rs2] == 0 })
	if w := h.c.weights(t); w[other] != 9 {
		t.Errorf("a health change of -t 10.0.0.1:80 changed %s: weight %d, want 9 until a resync", other, w[other])
	}
	// The resync, every 30 s, puts it back.
	time.Sleep(30 * time.Second)
	synctest.Wait()
	h.expect(t, "after a resync", func(w map[string]uint32) bool { return w[other] == 4 && w[rs2] == 0 })
	h.stop(t)
}
