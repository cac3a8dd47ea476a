//go:build lab

package lvsprep

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/lab/labtest"
)

// The BIRD lab: BIRD with lvsprep bird's configurations on a router (the
// test's namespace) and directors (named namespaces) on one link, a
// bridge in the router's namespace. The link is dual-stack: BIRD sends a
// director's global IPv6 address on it as the next hop of its IPv6
// routes, and the router accepts it only in a prefix of its own there.
//
//	router br0 10.2.0.1 2001:db8:2::1 ──┬ dir1 d0 10.2.0.11 2001:db8:2::11
//	                                     ├ dir2 d0 10.2.0.12 2001:db8:2::12
//	                                     └ ...
const (
	birdRouter4 = "10.2.0.1"
	birdRouter6 = "2001:db8:2::1"
	birdVIP4    = "10.3.0.1/32"
	birdVIP6    = "2001:db8:3::1/128"
)

type birdDir struct {
	ns, addr4 string
	addr6     string // global address on the link; "" for none
	proto     string // the router's session to it
	nl        *netlink.Handle
}

type birdLab struct {
	t    *testing.T
	tmp  string
	dirs []birdDir
	// names are the BIRDs in start order: "router", then directors' ns
	names []string
	birdc map[string][]string
	logs  map[string]*lockedBuffer
	nl    *netlink.Handle // in the router's namespace
}

// lockedBuffer collects a BIRD's log while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newBirdLab makes the link in the calling test's namespace (labtest.Netns
// first, whose thread the lab keeps). Addresses on the link skip duplicate
// address detection, so they are usable at once.
func newBirdLab(t *testing.T) *birdLab {
	l := &birdLab{t: t, tmp: t.TempDir(), birdc: map[string][]string{}, logs: map[string]*lockedBuffer{}}
	sh(t, "ip link add br0 type bridge mcast_snooping 0 && ip link set br0 up"+
		" && ip address add "+birdRouter4+"/24 dev br0 && ip address add "+birdRouter6+"/64 dev br0 nodad")
	l.nl = l.handle("")
	return l
}

// addDirector adds director i (1-9) on the link: 10.2.0.1i, and
// 2001:db8:2::1i if v6.
func (l *birdLab) addDirector(i int, v6 bool) birdDir {
	t := l.t
	d := birdDir{ns: fmt.Sprintf("lvsprep-bird-dir%d", i), addr4: fmt.Sprintf("10.2.0.1%d", i)}
	d.proto = "director_" + strings.ReplaceAll(d.addr4, ".", "_")
	sh(t, "ip netns add "+d.ns)
	t.Cleanup(func() { labtest.Sh(t, "ip netns del "+d.ns) })
	s := fmt.Sprintf("ip link add r%d type veth peer name d0 netns %s && ip link set r%d master br0 up"+
		" && ip -n %s link set lo up && ip -n %s address add %s/24 dev d0", i, d.ns, i, d.ns, d.ns, d.addr4)
	if v6 {
		d.addr6 = fmt.Sprintf("2001:db8:2::1%d", i)
		s += fmt.Sprintf(" && ip -n %s address add %s/64 dev d0 nodad", d.ns, d.addr6)
	}
	sh(t, s+" && ip -n "+d.ns+" link set d0 up")
	d.nl = l.handle(d.ns)
	l.dirs = append(l.dirs, d)
	return d
}

// handle is a netlink handle whose socket lives in namespace ns ("": the
// test's): made by the test's locked thread from inside ns. The socket
// stays there, so the handle works from any goroutine.
func (l *birdLab) handle(ns string) *netlink.Handle {
	t := l.t
	t.Helper()
	if ns != "" {
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + ns)
		if err != nil {
			t.Fatal(err)
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			t.Fatalf("setns %s: %v", ns, err)
		}
		defer func() {
			if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
				t.Fatalf("setns back from %s: %v", ns, err) // labtest.Netns's cleanup restores the thread
			}
		}()
	}
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("netlink in %q: %v", ns, err)
	}
	t.Cleanup(h.Close)
	return h
}

// inNS is the command that runs args in namespace ns ("": the test's).
func inNS(ns string, args ...string) []string {
	if ns == "" {
		return args
	}
	return append([]string{"/usr/bin/ip", "netns", "exec", ns}, args...)
}

// lvsprepBird runs lvsprep bird in ns and returns the configuration.
func (l *birdLab) lvsprepBird(ns string, args ...string) string {
	l.t.Helper()
	return l.lvsprepBirdResult(ns, args...).Stdout
}

// lvsprepBirdResult is lvsprepBird with its stderr too.
func (l *birdLab) lvsprepBirdResult(ns string, args ...string) labtest.Result {
	l.t.Helper()
	cmd := inNS(ns, append([]string{lvsprepBin, "bird"}, args...)...)
	r := labtest.Run(l.t, "", cmd[0], cmd[1:]...)
	if r.Code != 0 {
		l.t.Fatalf("%s: exit %d: %s%s", strings.Join(cmd, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r
}

// start runs BIRD in the foreground with conf in ns. It logs to a buffer
// instead of syslog, which the lab does not run, with every protocol's
// state changes and events: the BFD sessions' changes are counted from
// them.
func (l *birdLab) start(name, ns, conf string) {
	t := l.t
	t.Helper()
	const syslog = "log syslog { info, remote, warning, error, auth, fatal, bug };\n"
	if !strings.Contains(conf, syslog) {
		t.Fatalf("%s: no syslog line to replace in\n%s", name, conf)
	}
	conf = strings.Replace(conf, syslog, "log stderr all;\ndebug protocols { states, events };\n", 1)
	cf, ctl := filepath.Join(l.tmp, name+".conf"), filepath.Join(l.tmp, name+".ctl")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	args := inNS(ns, "/usr/sbin/bird", "-f", "-c", cf, "-s", ctl, "-P", filepath.Join(l.tmp, name+".pid"))
	cmd := exec.Command(args[0], args[1:]...)
	log := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	l.names = append(l.names, name)
	l.birdc[name] = inNS(ns, "/usr/sbin/birdc", "-s", ctl)
	l.logs[name] = log
}

func (l *birdLab) birdcRun(name string, args ...string) string {
	cmd := append(slices.Clone(l.birdc[name]), args...)
	r := labtest.Run(l.t, "", cmd[0], cmd[1:]...)
	return r.Stdout + r.Stderr
}

// state is what a failure prints: every BIRD's protocols, BFD sessions
// and log, and the router's kernel routes.
func (l *birdLab) state() string {
	var b strings.Builder
	for _, name := range l.names {
		fmt.Fprintf(&b, "--- %s:\n%s%s--- %s's log:\n%s", name, l.birdcRun(name, "show", "protocols", "all"),
			l.birdcRun(name, "show", "bfd", "sessions"), name, l.logs[name].String())
	}
	r := labtest.Run(l.t, "", "/usr/bin/ip", "route", "show", "proto", "bird")
	r6 := labtest.Run(l.t, "", "/usr/bin/ip", "-6", "route", "show", "proto", "bird")
	b.WriteString("--- router's routes:\n" + r.Stdout + r6.Stdout)
	return b.String()
}

// routes are the router's kernel routes from BIRD: each destination with
// its gateways, sorted.
func routes(h *netlink.Handle) (map[string][]string, error) {
	rs, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Protocol: unix.RTPROT_BIRD}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return nil, err
	}
	m := map[string][]string{}
	for _, r := range rs {
		if r.Dst == nil {
			continue
		}
		var gws []string
		if r.Gw != nil {
			gws = append(gws, r.Gw.String())
		}
		for _, nh := range r.MultiPath {
			gws = append(gws, nh.Gw.String())
		}
		slices.Sort(gws)
		m[r.Dst.String()] = gws
	}
	return m, nil
}

func (l *birdLab) routes() map[string][]string {
	l.t.Helper()
	m, err := routes(l.nl)
	if err != nil {
		l.t.Fatalf("listing routes: %v", err)
	}
	return m
}

// waitRoutes polls the router's routes every 10 ms until ok holds and
// returns how long that took; after limit, which only stops a hung test,
// it fails.
func (l *birdLab) waitRoutes(what string, limit time.Duration, ok func(map[string][]string) bool) time.Duration {
	l.t.Helper()
	start := time.Now()
	for !ok(l.routes()) {
		if time.Since(start) > limit {
			l.t.Fatalf("%s: not after %v: %v\n%s", what, limit, l.routes(), l.state())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// via: the route to dst has exactly the gateways gws (none: no route).
func via(dst string, gws ...string) func(map[string][]string) bool {
	slices.Sort(gws)
	return func(m map[string][]string) bool { return slices.Equal(m[dst], gws) }
}

func allOf(fs ...func(map[string][]string) bool) func(map[string][]string) bool {
	return func(m map[string][]string) bool {
		for _, f := range fs {
			if !f(m) {
				return false
			}
		}
		return true
	}
}

func ms(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

// TestLabBirdAnnounce: IPv4 and IPv6 (--ipv6 on both sides) from three
// directors. Each director's lvs-announce is a veth, as package announce
// makes it, so an IPv6 VIP passes duplicate address detection before
// BIRD sees it. A host address on it becomes the router's route via the
// director, one multipath route over the directors; a subnet does not,
// unless the router was given it with --prefix; deleting the device
// withdraws the director's routes. dir3 has no global IPv6 address on
// the link: its IPv4 VIP is announced, its IPv6 VIP is not.
func TestLabBirdAnnounce(t *testing.T) {
	labtest.Netns(t)
	l := newBirdLab(t)
	dir1, dir2, dir3 := l.addDirector(1, true), l.addDirector(2, true), l.addDirector(3, false)

	// Both configurations take their router id from the routing table.
	router := l.lvsprepBird("", "router", "--as", "65000", "--director-as", "65001", "--ipv6",
		"--director", dir1.addr4, "--director", dir2.addr4, "--director", dir3.addr4, "--prefix", "2001:db8:5::/64")
	if !strings.Contains(router, "router id "+birdRouter4+";") {
		t.Fatalf("router's configuration:\n%s", router)
	}
	l.start("router", "", router)
	for _, d := range l.dirs {
		r := l.lvsprepBirdResult(d.ns, "director", "--router", birdRouter4, "--router-as", "65000", "--as", "65001", "--ipv6")
		if !strings.Contains(r.Stdout, "router id "+d.addr4+";") {
			t.Fatalf("%s's configuration:\n%s", d.ns, r.Stdout)
		}
		// Only dir3, with link-local IPv6 addresses alone, is warned.
		if warned := strings.Contains(r.Stderr, "has no IPv6 address but link-local ones"); warned != (d.ns == dir3.ns) || (!warned && r.Stderr != "") {
			t.Errorf("%s: lvsprep bird director --ipv6 said %q", d.ns, r.Stderr)
		}
		l.start(d.ns, d.ns, r.Stdout)
	}

	start := time.Now()
	for _, a := range []struct {
		d     birdDir
		addrs []string
	}{
		{dir1, []string{birdVIP4, "10.4.0.1/24", birdVIP6, "2001:db8:4::1/64", "2001:db8:5::1/64"}},
		{dir2, []string{birdVIP4, birdVIP6}},
		{dir3, []string{birdVIP4, birdVIP6}},
	} {
		s := "ip -n " + a.d.ns + " link add lvs-announce type veth peer name lvs-announce-p" +
			" && ip -n " + a.d.ns + " link set lvs-announce-p up && ip -n " + a.d.ns + " link set lvs-announce up"
		for _, p := range a.addrs {
			s += " && ip -n " + a.d.ns + " address add " + p + " dev lvs-announce"
		}
		sh(t, s)
	}
	l.waitRoutes("the VIPs via the directors, dir1's --prefix", 60*time.Second, allOf(
		via(birdVIP4, dir1.addr4, dir2.addr4, dir3.addr4),
		via(birdVIP6, dir1.addr6, dir2.addr6),
		via("2001:db8:5::/64", dir1.addr6)))
	t.Logf("IPv4 VIP via 3 directors, IPv6 VIP via 2, %v after the devices were made", ms(time.Since(start)))
	// dir3's BIRD refuses its own IPv6 route: it has no next hop to give.
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(l.logs[dir3.ns].String(), "Invalid route "+birdVIP6+" withdrawn") {
		if time.Now().After(deadline) {
			t.Fatalf("dir3 never refused its IPv6 VIP\n%s", l.state())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lg := l.logs[dir3.ns].String(); !strings.Contains(lg, "Missing next hop address") {
		t.Errorf("dir3 did not say why:\n%s", lg)
	}
	if m := l.routes(); m["10.4.0.0/24"] != nil || m["2001:db8:4::/64"] != nil || !slices.Equal(m[birdVIP6], []string{dir1.addr6, dir2.addr6}) {
		t.Errorf("the router took a director's subnet, or dir3's IPv6 VIP: %v", m)
	}

	// Timed from the request: the kernel's deletion of a veth waits for
	// a grace period, during which BIRD may already have acted.
	withdraw := func(d birdDir, what string, ok func(map[string][]string) bool) {
		t.Helper()
		link, err := d.nl.LinkByName("lvs-announce")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := d.nl.LinkDel(link); err != nil {
			t.Fatal(err)
		}
		l.waitRoutes(what, 60*time.Second, ok)
		t.Logf("%s withdrawn %v after its lvs-announce was deleted", d.ns, ms(time.Since(start)))
	}
	withdraw(dir1, "dir1's routes withdrawn", allOf(
		via(birdVIP4, dir2.addr4, dir3.addr4), via(birdVIP6, dir2.addr6), via("2001:db8:5::/64")))
	withdraw(dir2, "dir2's routes withdrawn", allOf(via(birdVIP4, dir3.addr4), via(birdVIP6)))
	withdraw(dir3, "no route left", func(m map[string][]string) bool { return len(m) == 0 })
}

// routeWatch polls the router's route to the VIP every 10 ms in the
// background and times each spell without the live director (dir2, never
// silenced) and without any route: what false detections cost.
type routeWatch struct {
	quit, done chan struct{}
	err        error
	spells     [2][]time.Duration // 0: without dir2, 1: without any route
}

func (l *birdLab) watch(live string) *routeWatch {
	w := &routeWatch{quit: make(chan struct{}), done: make(chan struct{})}
	h := l.handle("")
	go func() {
		defer close(w.done)
		var since [2]time.Time
		for {
			m, err := routes(h)
			if err != nil {
				w.err = err
				return
			}
			now := time.Now()
			for i, out := range []bool{!slices.Contains(m[birdVIP4], live), len(m[birdVIP4]) == 0} {
				switch {
				case out && since[i].IsZero():
					since[i] = now
				case !out && !since[i].IsZero():
					w.spells[i] = append(w.spells[i], now.Sub(since[i]))
					since[i] = time.Time{}
				}
			}
			select {
			case <-w.quit:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *routeWatch) stop() string {
	close(w.quit)
	<-w.done
	if w.err != nil {
		return "route watch failed: " + w.err.Error()
	}
	var b strings.Builder
	for i, what := range []string{"without dir2", "without any route"} {
		var sum time.Duration
		for _, d := range w.spells[i] {
			sum += d
		}
		fmt.Fprintf(&b, "%s %d times, %v in all; ", what, len(w.spells[i]), ms(sum))
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// stallMeter sleeps 10 ms at a time and records how much later it woke:
// the VM's stalls, which look like a silent peer to BFD and BGP alike.
type stallMeter struct {
	quit, done chan struct{}
	over       [3]int // late by more than 0.3 s, 0.9 s, 3 s
	max        time.Duration
}

func startStallMeter() *stallMeter {
	m := &stallMeter{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			start := time.Now()
			select {
			case <-m.quit:
				return
			case <-time.After(10 * time.Millisecond):
			}
			late := time.Since(start) - 10*time.Millisecond
			m.max = max(m.max, late)
			for i, d := range []time.Duration{300 * time.Millisecond, 900 * time.Millisecond, 3 * time.Second} {
				if late > d {
					m.over[i]++
				}
			}
		}
	}()
	return m
}

func (m *stallMeter) stop() string {
	close(m.quit)
	<-m.done
	return fmt.Sprintf("late > 0.3 s %d times, > 0.9 s %d, > 3 s %d, at most %v", m.over[0], m.over[1], m.over[2], ms(m.max))
}

// silence sets the loss of a netem qdisc on the director's link to 100 %
// (everything it sends is dropped: to the router it is dead, the link
// still up) or back to 0. One netlink request, so the time of the change
// is known to a millisecond.
func (l *birdLab) silence(d birdDir, loss float32) {
	l.t.Helper()
	link, err := d.nl.LinkByName("d0")
	if err != nil {
		l.t.Fatal(err)
	}
	q := netlink.NewNetem(netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
		netlink.NetemQdiscAttrs{Loss: loss})
	if err := d.nl.QdiscReplace(q); err != nil {
		l.t.Fatalf("netem loss %v%% on %s's d0: %v", loss, d.ns, err)
	}
}

func bfdUp(sessions, addr string) bool {
	for _, line := range strings.Split(sessions, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == addr && f[2] == "Up" {
			return true
		}
	}
	return false
}

// TestLabBirdSilentDirector: a director that falls silent leaves the
// router's route, by BFD with --bfd, by the hold time without. Each
// subtest silences dir1 several times and lets it come back; dir2 is
// never touched, so each time the router drops it is a false detection,
// the emulated VM's stalls taken for a dead peer. The times are logged;
// only a hung test fails on them.
func TestLabBirdSilentDirector(t *testing.T) {
	const runs = 5
	for _, tc := range []struct {
		name  string
		flags []string
		// bound only stops a hung test. Without BFD: ten hold times (3 s,
		// the generator's). With BFD and the lab's 30 s hold time: 10 s.
		// BFD detects in 0.9 s; 15 silences in three runs of 2026-12-07
		// took 0.74-2.11 s, 2.11 s when the VM stalled 1.4 s (other runs
		// saw stalls of 2.2 s). 10 s leaves room for several stalls and
		// stays below the 20 s after which the hold time (30 s, a
		// keepalive every 10 s) could have withdrawn the director: a
		// withdrawal within it was BFD's.
		bound time.Duration
	}{
		{"hold", nil, 30 * time.Second},
		{"bfd", []string{"--bfd", "--hold", "30"}, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			labtest.Netns(t)
			l := newBirdLab(t)
			dir1, dir2 := l.addDirector(1, false), l.addDirector(2, false)
			bfd := slices.Contains(tc.flags, "--bfd")
			l.start("router", "", l.lvsprepBird("", append([]string{"router", "--as", "65000", "--director-as", "65001",
				"--director", dir1.addr4, "--director", dir2.addr4}, tc.flags...)...))
			for _, d := range l.dirs {
				l.start(d.ns, d.ns, l.lvsprepBird(d.ns, append([]string{"director", "--router", birdRouter4,
					"--router-as", "65000", "--as", "65001"}, tc.flags...)...))
				sh(t, "ip -n "+d.ns+" link add lvs-announce type dummy && ip -n "+d.ns+" link set lvs-announce up"+
					" && ip -n "+d.ns+" address add "+birdVIP4+" dev lvs-announce")
			}
			// netem, loss 0 until a run: the kernel loads sch_netem now.
			l.silence(dir1, 0)
			both := via(birdVIP4, dir1.addr4, dir2.addr4)
			l.waitRoutes("the VIP via both directors", 60*time.Second, both)

			meter, watch, observed := startStallMeter(), l.watch(dir2.addr4), time.Now()
			var gone, back []time.Duration
			for i := 0; i < runs; i++ {
				// BGP does not wait for BFD: silenced before its BFD
				// session is up, dir1 would go only with the hold time.
				// And a false detection may have taken it out again.
				for w := time.Now(); ; time.Sleep(100 * time.Millisecond) {
					s := ""
					if bfd {
						s = l.birdcRun("router", "show", "bfd", "sessions")
					}
					if (!bfd || bfdUp(s, dir1.addr4)) && both(l.routes()) {
						break
					}
					if time.Since(w) > 60*time.Second {
						t.Fatalf("run %d: dir1 not in the route with its BFD session up after 60 s:\n%s\n%s", i, s, l.state())
					}
				}
				silenced := time.Now()
				l.silence(dir1, 100)
				l.waitRoutes("dir1 withdrawn after it fell silent", tc.bound, func(m map[string][]string) bool {
					return !slices.Contains(m[birdVIP4], dir1.addr4)
				})
				gone = append(gone, time.Since(silenced))
				spoke := time.Now()
				l.silence(dir1, 0)
				l.waitRoutes("dir1 back after it spoke again", 120*time.Second, both)
				back = append(back, time.Since(spoke))
				t.Logf("run %d: dir1 withdrawn %v after it fell silent, back %v after it spoke again", i, ms(gone[i]), ms(back[i]))
			}
			t.Logf("%s: dir1 withdrawn after %v-%v, back after %v-%v (%d runs)", tc.name,
				ms(slices.Min(gone)), ms(slices.Max(gone)), ms(slices.Min(back)), ms(slices.Max(back)), runs)
			elapsed := time.Since(observed)
			t.Logf("over %v: VM %s; the router's route to the VIP %s", ms(elapsed), meter.stop(), watch.stop())
			lg := l.logs["router"].String()
			for _, d := range l.dirs {
				t.Logf("router's log: %s: BFD session down %d times, hold timer expired %d, BGP session established %d",
					d.ns, strings.Count(lg, "Session to "+d.addr4+" changed state from Up to Down"),
					strings.Count(lg, d.proto+": Error: Hold timer expired"), strings.Count(lg, d.proto+": BGP session established"))
			}
		})
	}
}
