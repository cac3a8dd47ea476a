package lvsprep

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/netfilter"
)

// errKilled stands for a SIGKILL: the crashing fakes panic with it at a
// chosen change, before or after making it, and nothing else runs (no
// rollback, no state write), as with a real kill.
var errKilled = errors.New("killed")

// crasher counts the host changes lvsprep makes and "kills" it at one of
// them: at change number at, before making it (after=false) or just after.
type crasher struct {
	at, n int
	after bool
}

func (c *crasher) do(op func() error) error {
	c.n++
	if c.n == c.at && !c.after {
		panic(errKilled)
	}
	err := op()
	if c.n == c.at && c.after {
		panic(errKilled)
	}
	return err
}

type crashSysctl struct {
	netfilter.Sysctl
	c *crasher
}

func (s crashSysctl) Set(name, v string) error {
	return s.c.do(func() error { return s.Sysctl.Set(name, v) })
}

type crashLinks struct {
	netfilter.Links
	c *crasher
}

func (l crashLinks) SetUp(d string, up bool) error {
	return l.c.do(func() error { return l.Links.SetUp(d, up) })
}
func (l crashLinks) AddAddr(d string, a netip.Prefix) error {
	return l.c.do(func() error { return l.Links.AddAddr(d, a) })
}
func (l crashLinks) DelAddr(d string, a netip.Prefix) error {
	return l.c.do(func() error { return l.Links.DelAddr(d, a) })
}
func (l crashLinks) AddRoute(r netfilter.Route) error {
	return l.c.do(func() error { return l.Links.AddRoute(r) })
}
func (l crashLinks) ReplaceRoute(r netfilter.Route) error {
	return l.c.do(func() error { return l.Links.ReplaceRoute(r) })
}
func (l crashLinks) DelRoute(r netfilter.Route) error {
	return l.c.do(func() error { return l.Links.DelRoute(r) })
}

type crashModules struct {
	netfilter.Modules
	c *crasher
}

func (m crashModules) Load(n string) error { return m.c.do(func() error { return m.Modules.Load(n) }) }
func (m crashModules) Unload(n string) error {
	return m.c.do(func() error { return m.Modules.Unload(n) })
}

type crashIPTables struct {
	netfilter.IPTables
	c *crasher
}

func (t crashIPTables) Append(table, chain string, r ...string) error {
	return t.c.do(func() error { return t.IPTables.Append(table, chain, r...) })
}
func (t crashIPTables) Delete(table, chain string, r ...string) error {
	return t.c.do(func() error { return t.IPTables.Delete(table, chain, r...) })
}

// runKilled runs lvsprep on a host whose changes crash at c; it reports
// whether the kill happened.
func (th *testHost) runKilled(c *crasher, args ...string) (killed bool) {
	h := *th.Host
	h.ipt = nil
	h.Sysctl = crashSysctl{h.Sysctl, c}
	h.Links = crashLinks{h.Links, c}
	h.Modules = crashModules{h.Modules, c}
	ipt := h.IPTables
	h.IPTables = func(f netfilter.Family) (netfilter.IPTables, error) {
		t, err := ipt(f)
		return crashIPTables{t, c}, err
	}
	defer func() {
		if r := recover(); r != nil {
			if r != errKilled {
				panic(r)
			}
			killed = true
		}
	}()
	var o, e strings.Builder
	Main(append([]string{"lvsprep", "--state-dir", th.stateDir}, args...), nil, &o, &e, &h)
	return false
}

// profilesForKills cover every kind of step: modules, sysctls, a link,
// addresses, iptables rules, and default routes replaced (metric 0) and
// added beside others.
var profilesForKills = [][]string{
	{"rs", "nat", "--gateway", "10.0.0.1", "--dev", "eth1"},
	{"rs", "tun", "--vip", "10.0.0.100", "--dev", "eth0"},
	{"director", "fullnat", "--vip", "10.0.0.200/24", "--dev", "eth1", "--snat", "172.16.0.2", "--port", "80"},
	{"director", "nat", "--vip", "202.103.106.5/24", "--dev", "eth1", "--rs-net", "172.16.0.0/24"},
}

func undoArgs(args []string) []string {
	out := []string{args[0], args[1]}
	for i := 2; i+1 < len(args); i += 2 {
		if args[i] == "--vip" || args[i] == "--gateway" {
			out = append(out, args[i], args[i+1])
		}
	}
	return append(out, "--undo")
}

// TestKillAtEveryChangeLeavesAnUndoableRecord kills lvsprep before and
// after each host change it makes, applying and undoing, and requires
// that --undo then restores the host exactly: the journal records every
// change before it is made.
func TestKillAtEveryChangeLeavesAnUndoableRecord(t *testing.T) {
	kills := 0
	for _, args := range profilesForKills {
		for _, undoing := range []bool{false, true} {
			for _, after := range []bool{false, true} {
				for at := 1; ; at++ {
					th := newTestHost(t)
					th.links.Routes = append(th.links.Routes, netfilter.Route{Gateway: netip.MustParseAddr("172.16.0.253"), Dev: "eth0", Protocol: 3})
					before := th.snapshot()
					c := &crasher{at: at, after: after}
					var killed bool
					if undoing {
						th.mustRun(args...)
						killed = th.runKilled(c, undoArgs(args)...)
					} else {
						killed = th.runKilled(c, args...)
					}
					if !killed {
						break // past the last change
					}
					kills++
					name := fmt.Sprintf("%v undo=%t kill %s change %d", args, undoing, map[bool]string{false: "before", true: "after"}[after], at)
					if out, errOut, code := th.run(undoArgs(args)...); code != 0 {
						t.Fatalf("%s: --undo after the kill: exit %d\n%s%s", name, code, out, errOut)
					}
					if after := th.snapshot(); after != before {
						t.Errorf("%s: host after --undo differs:\nbefore:\n%s\nafter:\n%s", name, before, after)
					}
					if got := th.stateFiles(); len(got) != 0 {
						t.Errorf("%s: state left: %v", name, got)
					}
				}
			}
		}
	}
	if kills < 40 {
		t.Errorf("only %d kills landed; the profiles make more changes than that", kills)
	}
	t.Logf("%d kills, each followed by --undo restoring the host exactly", kills)
}

func TestStatusShowsAnInterruptedChange(t *testing.T) {
	th := newTestHost(t)
	args := []string{"rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0"}
	if !th.runKilled(&crasher{at: 2, after: true}, args...) {
		t.Fatal("no kill")
	}
	out := th.mustRun("status")
	if !strings.Contains(out, "2 of 3 (1 interrupted)") {
		t.Errorf("status does not show the interrupted change:\n%s", out)
	}
}

// TestRouteStepNeverLeavesTheHostWithoutADefaultRoute: with a default
// route of the same metric, the new one replaces it in one step; at no
// change is the host without a default route.
func TestRouteStepNeverLeavesTheHostWithoutADefaultRoute(t *testing.T) {
	for _, metric := range []int{0, 100} {
		th := newTestHost(t)
		th.links.Routes = []netfilter.Route{{Gateway: netip.MustParseAddr("172.16.0.254"), Dev: "eth0", Metric: metric}}
		for at := 1; ; at++ {
			c := &crasher{at: at, after: true}
			if !th.runKilled(c, "rs", "nat", "--gateway", "10.0.0.1", "--dev", "eth1") {
				th.mustRun("rs", "nat", "--gateway", "10.0.0.1", "--undo")
				break
			}
			if rs, _ := th.links.DefaultRoutes(netfilter.IPv4); len(rs) == 0 {
				t.Errorf("metric %d: no default route after change %d", metric, at)
			}
			th.mustRun("rs", "nat", "--gateway", "10.0.0.1", "--undo")
		}
		out := th.mustRun("rs", "nat", "--gateway", "10.0.0.1", "--dev", "eth1")
		want := "ip route add default via 10.0.0.1 dev eth1; ip route del default via 172.16.0.254 dev eth0 metric 100"
		if metric == 0 {
			want = "ip route replace default via 10.0.0.1 dev eth1\n"
		}
		if !strings.Contains(out, want) {
			t.Errorf("metric %d: output lacks %q:\n%s", metric, want, out)
		}
	}
}

// plant writes a state file as an attacker would: under the state
// directory, naming a setting lvsprep never touches.
const plantedState = `{"profile":"realserver dr","args":["--vip","10.0.0.100","--dev","eth0"],
 "applied":"2025-01-02T03:04:05Z","records":[
 {"kind":"sysctl","why":"x","sysctl":"kernel/core_pattern","value":"core","changed":true,"prior":"|/tmp/evil %p"}]}`

// TestPlantedStateCannotWriteCorePattern is the regression test for the
// core_pattern attack: a state file planted under --state-dir (or
// LVSPREP_STATE_DIR) made root's --undo write kernel.core_pattern. Now the
// file is refused for what it holds, for its owner and for its mode, and
// --undo changes nothing.
func TestPlantedStateCannotWriteCorePattern(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(th *testHost, file string)
		want  string
	}{
		{"a setting no profile has", func(th *testHost, file string) {}, "kernel/core_pattern: not a step of realserver dr"},
		{"world-writable", func(th *testHost, file string) {
			writeValid(th, file)
			os.Chmod(file, 0o666)
		}, "writable by group or others"},
		{"another owner", func(th *testHost, file string) {
			writeValid(th, file)
			th.Host.UID = -1 // root alone is trusted, as when root runs it
			if os.Geteuid() == 0 {
				os.Chown(file, 65534, 65534)
			}
		}, "not root"},
		{"a symbolic link", func(th *testHost, file string) {
			other := filepath.Join(t.TempDir(), "x.json")
			os.Rename(file, other)
			os.Symlink(other, file)
		}, "symbolic link"},
		{"via LVSPREP_STATE_DIR", func(th *testHost, file string) {}, "kernel/core_pattern"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := newTestHost(t)
			th.setSysctl("kernel/core_pattern", "core")
			os.MkdirAll(th.stateDir, 0o700)
			file := statePath(th.stateDir, "realserver-dr-10.0.0.100")
			if err := os.WriteFile(file, []byte(plantedState), 0o600); err != nil {
				t.Fatal(err)
			}
			tc.plant(th, file)
			before := th.snapshot()
			var errOut string
			var code int
			if tc.name == "via LVSPREP_STATE_DIR" {
				t.Setenv("LVSPREP_STATE_DIR", th.stateDir)
				var o, e strings.Builder
				h := *th.Host
				code = Main([]string{"lvsprep", "rs", "dr", "--vip", "10.0.0.100", "--undo"}, nil, &o, &e, &h)
				errOut = e.String()
			} else {
				_, errOut, code = th.run("rs", "dr", "--vip", "10.0.0.100", "--undo")
			}
			if code != 1 || !strings.Contains(errOut, tc.want) {
				t.Errorf("--undo: exit %d, stderr %q; want 1 and %q", code, errOut, tc.want)
			}
			if got := th.sysctl("kernel/core_pattern"); got != "core" {
				t.Errorf("kernel.core_pattern = %q", got)
			}
			if th.snapshot() != before {
				t.Error("--undo of planted state changed the host")
			}
		})
	}
}

// writeValid replaces the planted file with one lvsprep would write, so
// that only its owner or mode is wrong.
func writeValid(th *testHost, file string) {
	th.t.Helper()
	os.Remove(file)
	th.mustRun("rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0")
}

func TestStateDirectoryIsCheckedAndTightened(t *testing.T) {
	th := newTestHost(t)
	os.MkdirAll(th.stateDir, 0o755)
	th.mustRun("rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0")
	if fi, _ := os.Stat(th.stateDir); fi.Mode().Perm() != 0o700 {
		t.Errorf("existing state directory left at %v, want 0700", fi.Mode().Perm())
	}

	// A state directory that is a symbolic link is refused.
	th2 := newTestHost(t)
	real := t.TempDir()
	if err := os.Symlink(real, th2.stateDir); err != nil {
		t.Fatal(err)
	}
	before := th2.snapshot()
	_, errOut, code := th2.run("rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0")
	if code != 1 || !strings.Contains(errOut, "symbolic link") {
		t.Errorf("symlinked state directory: exit %d, stderr %q", code, errOut)
	}
	if th2.snapshot() != before {
		t.Error("refused run changed the host")
	}

	// A parent others may write into is refused (they could swap the
	// directory).
	th3 := newTestHost(t)
	parent := filepath.Join(t.TempDir(), "open")
	os.Mkdir(parent, 0o777)
	os.Chmod(parent, 0o777)
	th3.stateDir = filepath.Join(parent, "state")
	if _, errOut, code := th3.run("rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0"); code != 1 || !strings.Contains(errOut, "others could replace") {
		t.Errorf("world-writable parent: exit %d, stderr %q", code, errOut)
	}
}

// TestCorruptProfileBlocksNoOther: one unreadable state file does not stop
// the undo of another profile; status lists it plainly and fails.
func TestCorruptProfileBlocksNoOther(t *testing.T) {
	th := newTestHost(t)
	th.mustRun("rs", "nat", "--gateway", "10.0.0.1")
	withNAT := th.snapshot()
	th.mustRun("rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0")
	bad := statePath(th.stateDir, "realserver-nat-ipv4")
	os.WriteFile(bad, []byte("{\"profile\": \"realserver nat\", garbage"), 0o600)

	out, _, code := th.run("status")
	if code != 1 || !strings.Contains(out, "| realserver-nat-ipv4 | UNUSABLE STATE") || !strings.Contains(out, "| realserver dr ") ||
		!strings.Contains(out, bad+": not a state file") {
		t.Errorf("status: exit %d\n%s", code, out)
	}
	_, errOut, code := th.run("rs", "nat", "--gateway", "10.0.0.1", "--undo")
	if code != 1 || !strings.Contains(errOut, "nothing was changed") {
		t.Errorf("undo of the corrupt profile: exit %d, stderr %q", code, errOut)
	}
	out = th.mustRun("rs", "dr", "--vip", "10.0.0.100", "--undo")
	if !strings.Contains(out, "warning: passing over") {
		t.Errorf("undo does not name the file it passed over:\n%s", out)
	}
	if after := th.snapshot(); after != withNAT {
		t.Errorf("undo of the sound profile did not restore its settings:\n%s\nwant\n%s", after, withNAT)
	}
}

// TestStaleNamespaceStateIsSetAside: a netns-INODE directory written by a
// namespace that is gone (same inode, another cookie) is moved aside, not
// applied to the new namespace.
func TestStaleNamespaceStateIsSetAside(t *testing.T) {
	th := newTestHost(t)
	root := th.stateDir
	th.stateDir = filepath.Join(root, "netns-4026532000")
	th.mustRun("rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0")
	// The namespace dies with its settings; a new one gets the inode.
	fresh := newTestHost(t)
	th.links, th.Host.Links = fresh.links, fresh.links
	th.sysRoot, th.Host.Sysctl = fresh.sysRoot, fresh.Host.Sysctl
	th.ident.Cookie = 2

	_, errOut, _ := th.run("status")
	if !strings.Contains(errOut, "written by an earlier network namespace") {
		t.Errorf("status does not note the stale state: %q", errOut)
	}
	out := th.mustRun("rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0")
	if !strings.Contains(out, "moved to "+filepath.Join(root, "stale-netns-4026532000-1")) || !strings.Contains(out, "5 changed") {
		t.Errorf("apply in the new namespace:\n%s", out)
	}
	// In a directory the user named, stale state is refused.
	th.stateDir = root
	th.ident.Cookie = 1
	th.mustRun("rs", "nat", "--gateway", "10.0.0.1")
	th.ident.Boot = "another boot"
	if _, errOut, code := th.run("rs", "nat", "--gateway", "10.0.0.1", "--undo"); code != 1 || !strings.Contains(errOut, "before a reboot") {
		t.Errorf("stale state in a named directory: exit %d, stderr %q", code, errOut)
	}
}

// holdLock takes the state directory's lock as another lvsprep would, and
// returns its release.
func holdLock(th *testHost) (release func()) {
	th.t.Helper()
	th.mustRun("status")
	os.MkdirAll(th.stateDir, 0o700)
	fd, err := unix.Open(th.stateDir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		th.t.Fatal(err)
	}
	th.t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		th.t.Fatal(err)
	}
	return func() { unix.Flock(fd, unix.LOCK_UN) }
}

// guardedLinks makes its links' changes under mu, so that a test may
// look at the fake while lvsprep runs.
type guardedLinks struct {
	netfilter.Links
	mu *sync.Mutex
}

func (l guardedLinks) guard(op func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return op()
}

func (l guardedLinks) SetUp(d string, up bool) error {
	return l.guard(func() error { return l.Links.SetUp(d, up) })
}
func (l guardedLinks) AddAddr(d string, a netip.Prefix) error {
	return l.guard(func() error { return l.Links.AddAddr(d, a) })
}
func (l guardedLinks) DelAddr(d string, a netip.Prefix) error {
	return l.guard(func() error { return l.Links.DelAddr(d, a) })
}
func (l guardedLinks) AddRoute(r netfilter.Route) error {
	return l.guard(func() error { return l.Links.AddRoute(r) })
}
func (l guardedLinks) ReplaceRoute(r netfilter.Route) error {
	return l.guard(func() error { return l.Links.ReplaceRoute(r) })
}
func (l guardedLinks) DelRoute(r netfilter.Route) error {
	return l.guard(func() error { return l.Links.DelRoute(r) })
}

// TestChangesWaitForTheLock: a second lvsprep waits while another holds
// the state directory's lock. It runs in a synctest bubble: the wait's
// polls sleep on fake time, so nearly two minutes of it pass at once.
func TestChangesWaitForTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th := newTestHost(t)
		release := holdLock(th)
		var mu sync.Mutex
		th.Host.Links = guardedLinks{th.Host.Links, &mu}
		hasVIP := func() bool {
			mu.Lock()
			defer mu.Unlock()
			return th.hasAddr("lo", "10.0.0.100/32")
		}
		done := make(chan int)
		go func() {
			_, _, code := th.run("rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0")
			done <- code
		}()
		// While the lock is held nothing may change; the run then finishes.
		for range 5 {
			time.Sleep(23 * time.Second)
			synctest.Wait()
			select {
			case code := <-done:
				t.Fatalf("lvsprep finished (exit %d) while another held the lock", code)
			default:
			}
			if hasVIP() {
				t.Fatal("lvsprep changed the host while another held the lock")
			}
		}
		release()
		if code := <-done; code != 0 || !th.hasAddr("lo", "10.0.0.100/32") {
			t.Errorf("after the lock was released: exit %d", code)
		}
	})
}

// TestChangesGiveUpOnALockHeldTwoMinutes: a lock held for two minutes
// ends the wait in an error, with the host unchanged.
func TestChangesGiveUpOnALockHeldTwoMinutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th := newTestHost(t)
		release := holdLock(th)
		defer release()
		start := time.Now()
		_, errOut, code := th.run("rs", "dr", "--vip", "10.0.0.100", "--dev", "eth0")
		if waited := time.Since(start); waited < 2*time.Minute || waited > 2*time.Minute+time.Second {
			t.Errorf("gave up after %s, want 2 minutes", waited)
		}
		if code != 1 || !strings.Contains(errOut, "another lvsprep has held the lock on "+th.stateDir+" for 2 minutes") {
			t.Errorf("exit %d, stderr %q; want 1 and the lock held for 2 minutes", code, errOut)
		}
		if th.hasAddr("lo", "10.0.0.100/32") {
			t.Error("lvsprep changed the host without the lock")
		}
	})
}
