package lvsctl

import (
	"errors"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lvskit/lvskit/lvsctl/record"
	lvsrun "github.com/lvskit/lvskit/lvsctl/run"
)

// fakeDevice is an announcing device in memory.
type fakeDevice struct {
	mu     sync.Mutex
	name   string
	have   []netip.Prefix
	opened int
	closed bool
}

func (d *fakeDevice) Set(ps []netip.Prefix) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.have = slices.Clone(ps)
	return nil
}

func (d *fakeDevice) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed, d.have = true, nil
	return nil
}

func (d *fakeDevice) announced() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, p := range d.have {
		out = append(out, p.String())
	}
	return out
}

// expect fails the test unless the device holds exactly want.
func (d *fakeDevice) expect(t *testing.T, what string, want ...string) {
	t.Helper()
	if got := d.announced(); !slices.Equal(got, want) {
		t.Fatalf("%s: the device holds %v, want %v", what, got, want)
	}
}

// drainPoll is how often run looks at the withdrawal file, and tries
// again to make a device it could not, and to announce a prefix that
// waits for its real servers' rise checks.
const drainPoll = time.Second

// TestRunAnnounces: with the file's announce, run announces the VIP only
// once its checks have run, withdraws it when every real server failed
// (when_all_down withdraw, the default) and announces it again when one
// is back; a withdrawal file takes it out; stopping run closes the device.
func TestRunAnnounces(t *testing.T) { synctest.Test(t, testRunAnnounces) }

func testRunAnnounces(t *testing.T) {
	f, env, file := runFixture(t)
	doc := strings.Replace(runYAML, "services:\n", "announce: {}\nservices:\n", 1)
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := &fakeDevice{}
	env.Announce = func(name string) (lvsrun.Announcer, error) {
		dev.mu.Lock()
		defer dev.mu.Unlock()
		dev.name = name
		dev.opened++
		return dev, nil
	}
	h := startRun(t, f, file, env)
	dev.expect(t, "before the first checks")
	h.probedSinceStart(t, 1, ip1, ip2)
	dev.expect(t, "after the first checks", "10.0.0.1/32")
	if dev.name != "lvs-announce" {
		t.Errorf("device %q", dev.name)
	}

	h.probes.set(ip1, true)
	h.probes.set(ip2, true)
	h.probed(t, 2, ip1, ip2)
	dev.expect(t, "every real server failed")
	h.probes.set(ip2, false)
	h.probed(t, 2, ip2)
	// rs2 alone is back: the VIP waits the time rs1's rise checks would
	// take (3 intervals: 600 ms), then the next poll announces it.
	time.Sleep(600*time.Millisecond + drainPoll)
	synctest.Wait()
	dev.expect(t, "rs2 back", "10.0.0.1/32")

	// A maintenance withdrawal, as lvsctl withdraw writes it.
	j, err := record.Open(env.JournalDir, env.JournalDir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.SaveWithdrawal(&record.Withdrawal{All: true, Since: time.Now()}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(drainPoll)
	synctest.Wait()
	dev.expect(t, "withdrawn")
	if st, err := j.LoadRun(); err != nil || len(st.Announce) != 1 || st.Announce[0].Announced || st.Announce[0].Why != "withdrawn by lvsctl withdraw" {
		t.Fatalf("the record while withdrawn: %v, %+v", err, st)
	}
	if err := j.SaveWithdrawal(nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(drainPoll)
	synctest.Wait()
	dev.expect(t, "the withdrawal ended", "10.0.0.1/32")

	r := h.stop(t)
	if !dev.closed || dev.opened != 1 {
		t.Errorf("after the stop: closed %v, opened %d times", dev.closed, dev.opened)
	}
	for _, line := range []string{"announcing 10.0.0.1/32", "not announcing 10.0.0.1/32: no real server in service",
		"not announcing 10.0.0.1/32: withdrawn by lvsctl withdraw", "the withdrawal ended"} {
		if !strings.Contains(r.stderr, "lvsctl run: "+line) {
			t.Errorf("the log lacks %q:\n%s", line, r.stderr)
		}
	}
}

// TestRunAnnouncesAfterItsOwnChecks: a restarted run whose record says
// every server is up announces only after its own checks ran.
func TestRunAnnouncesAfterItsOwnChecks(t *testing.T) {
	synctest.Test(t, testRunAnnouncesAfterItsOwnChecks)
}

func testRunAnnouncesAfterItsOwnChecks(t *testing.T) {
	f, env, file := runFixture(t)
	doc := strings.Replace(runYAML, "services:\n", "announce: {when_all_down: keep}\nservices:\n", 1)
	doc = strings.ReplaceAll(doc, "interval: 200ms", "interval: 2s")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := &fakeDevice{}
	env.Announce = func(string) (lvsrun.Announcer, error) { return dev, nil }
	h := startRun(t, f, file, env)
	h.probedSinceStart(t, 1, ip1, ip2)
	dev.expect(t, "first start", "10.0.0.1/32")
	h.stop(t)
	dev2 := &fakeDevice{}
	env.Announce = func(string) (lvsrun.Announcer, error) { return dev2, nil }
	h2 := startRun(t, f, file, env)
	defer h2.stop(t)
	// Both servers in service from the record at once, but the first
	// probes come within the 2 s interval: not announced before both ran.
	if got := dev2.announced(); len(got) != 0 && (h2.probes.count(ip1) == 0 || h2.probes.count(ip2) == 0) {
		t.Errorf("announced %v before every check of this run", got)
	}
	h2.probedSinceStart(t, 1, ip1)
	if got := dev2.announced(); len(got) != 0 && h2.probes.count(ip2) == 0 {
		t.Errorf("announced %v before every check of this run", got)
	}
	h2.probedSinceStart(t, 1, ip2)
	// No health changed: the next poll announces.
	time.Sleep(drainPoll)
	synctest.Wait()
	dev2.expect(t, "after the restart's checks", "10.0.0.1/32")
	// keep: every server failed, still announced, and still at the next poll.
	h2.probes.set(ip1, true)
	h2.probes.set(ip2, true)
	h2.probed(t, 2, ip1, ip2)
	h2.logHas(t, "ALL REAL SERVERS OF -t 10.0.0.1:80 FAILED")
	dev2.expect(t, "when_all_down keep", "10.0.0.1/32")
	time.Sleep(drainPoll)
	synctest.Wait()
	dev2.expect(t, "when_all_down keep, a poll later", "10.0.0.1/32")
}

// TestRunRetriesTheDevice: a device that cannot be made at the first
// announcement (its name still held: the device of a killed run goes
// with its network namespace, which the kernel frees a moment later) is
// tried again within seconds, not at the next resync.
func TestRunRetriesTheDevice(t *testing.T) { synctest.Test(t, testRunRetriesTheDevice) }

func testRunRetriesTheDevice(t *testing.T) {
	f, env, file := runFixture(t)
	doc := strings.Replace(runYAML, "services:\n", "announce: {}\nservices:\n", 1)
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := &fakeDevice{}
	var mu sync.Mutex
	tries := 0
	env.Announce = func(string) (lvsrun.Announcer, error) {
		mu.Lock()
		defer mu.Unlock()
		if tries++; tries == 1 {
			return nil, errors.New("announce device lvs-announce: exists: another process announces through it")
		}
		return dev, nil
	}
	h := startRun(t, f, file, env)
	h.probedSinceStart(t, 1, ip1, ip2)
	h.logHas(t, "cannot announce")
	// Tried again at the next poll, a second later, not at the next
	// resync (30 s).
	time.Sleep(drainPoll)
	synctest.Wait()
	dev.expect(t, "after the device could not be made once", "10.0.0.1/32")
	h.logHas(t, "announce device lvs-announce made")
	// The log says announcing once, when the device has the prefix.
	log := h.stop(t).stderr
	failed, announcing := strings.Index(log, "cannot announce"), strings.Index(log, "lvsctl run: announcing 10.0.0.1/32")
	if strings.Count(log, "lvsctl run: announcing 10.0.0.1/32") != 1 || announcing < failed {
		t.Errorf("run's log says announcing before the device could be made, or more than once:\n%s", log)
	}
}

// TestRunAnnounceWaitsForReturningServers: a VIP that had no real server
// in service is announced again only when every real server is back, or
// once the others had the time of their rise checks: before, this
// director's mh table would differ from the others'.
func TestRunAnnounceWaitsForReturningServers(t *testing.T) {
	synctest.Test(t, testRunAnnounceWaitsForReturningServers)
}

func testRunAnnounceWaitsForReturningServers(t *testing.T) {
	f, env, file := runFixture(t)
	doc := strings.Replace(runYAML, "services:\n", "announce: {}\nservices:\n", 1)
	doc = strings.ReplaceAll(doc, "interval: 200ms", "interval: 500ms")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := &fakeDevice{}
	env.Announce = func(string) (lvsrun.Announcer, error) { return dev, nil }
	h := startRun(t, f, file, env)
	defer h.stop(t)
	h.probedSinceStart(t, 1, ip1, ip2)
	dev.expect(t, "after the first checks", "10.0.0.1/32")
	h.probes.set(ip1, true)
	h.probes.set(ip2, true)
	h.probed(t, 2, ip1, ip2)
	dev.expect(t, "every real server failed")

	// rs1 alone comes back: the VIP waits (rise 2 × 500 ms, and an
	// interval: 1.5 s), then is announced with rs2 still out.
	h.probes.set(ip1, false)
	h.probed(t, 2, ip1)
	h.logHas(t, rs1+" down -> up")
	if got := dev.announced(); len(got) != 0 {
		t.Errorf("announced %v as soon as one real server was back", got)
	}
	j, err := record.Open(env.JournalDir, env.JournalDir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if st, err := j.LoadRun(); err != nil || st == nil || len(st.Announce) != 1 || st.Announce[0].Why != "back from no real server: waiting for the others' rise checks" {
		t.Fatalf("the record does not say the VIP waits: %v %+v", err, st)
	}
	// rs1 came back less than settled ago: 1.4 s on, the rise period has
	// not passed; a poll after it has, the VIP is announced.
	time.Sleep(1500*time.Millisecond - settled)
	synctest.Wait()
	dev.expect(t, "before the rise period passed")
	time.Sleep(settled + drainPoll)
	synctest.Wait()
	dev.expect(t, "the rise period passed", "10.0.0.1/32")

	// Both back together: announced as soon as both are in service.
	h.probes.set(ip1, true)
	h.probed(t, 2, ip1)
	dev.expect(t, "rs1 failed too")
	h.probes.set(ip1, false)
	h.probes.set(ip2, false)
	h.probed(t, 2, ip1, ip2)
	h.expect(t, "both back", func(w map[string]uint32) bool { return w[rs1] == 3 && w[rs2] == 1 })
	dev.expect(t, "both back", "10.0.0.1/32")
}
