package lvsctl

import (
	"encoding/json"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"github.com/lvskit/lvskit/lvsctl/record"
)

const announceRules = `-A -t 10.3.0.1:80 -s rr
-a -t 10.3.0.1:80 -r 192.168.1.1:80 -m -w 1
-A -u 10.3.0.1:53 -s rr
-a -u 10.3.0.1:53 -r 192.168.1.3:53 -m -w 1
-A -t 10.3.0.2:80 -s rr
-a -t 10.3.0.2:80 -r 192.168.1.2:80 -m -w 1
`

var (
	vip1 = netip.MustParsePrefix("10.3.0.1/32")
	vip2 = netip.MustParsePrefix("10.3.0.2/32")
	web1 = ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.3.0.1"), Port: 80}
)

// fakeAnnouncer stands in for a running lvsctl run that announces
// 10.3.0.1/32 and 10.3.0.2/32: its record, in a journal the test holds,
// and take, which does what run does within a second of a withdrawal.
type fakeAnnouncer struct {
	t   *testing.T
	j   *record.Journal
	run record.Run
}

func newFakeAnnouncer(t *testing.T, env Env, pid int) *fakeAnnouncer {
	t.Helper()
	j, err := record.Open(env.JournalDir, env.JournalDir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	a := &fakeAnnouncer{t: t, j: j, run: record.Run{PID: pid, File: "director.yaml", Started: time.Now(), Announce: []record.Announcement{
		{Prefix: vip1, Announced: true, Services: []string{"-t 10.3.0.1:80", "-u 10.3.0.1:53"}},
		{Prefix: vip2, Announced: true, Services: []string{"-t 10.3.0.2:80"}},
	}}}
	a.save()
	return a
}

func (a *fakeAnnouncer) save() {
	a.t.Helper()
	if err := a.j.SaveRun(&a.run); err != nil {
		a.t.Fatal(err)
	}
}

// take reads the withdrawal and rewrites the record's announcement.
func (a *fakeAnnouncer) take() {
	a.t.Helper()
	w, err := a.j.LoadWithdrawal()
	if err != nil {
		a.t.Error(err)
		return
	}
	for i := range a.run.Announce {
		an := &a.run.Announce[i]
		an.Announced, an.Why = !w.Withdraws(an.Prefix), ""
		if !an.Announced {
			an.Why = "withdrawn by lvsctl withdraw"
		}
	}
	a.save()
}

// clock is a fake Env.Now and Env.Sleep: each sleep moves it on and then
// calls each, when set.
type clock struct {
	now  time.Time
	each func()
}

func (c *clock) env(env Env) Env {
	env.Now = func() time.Time { return c.now }
	env.Sleep = func(d time.Duration) {
		c.now = c.now.Add(d)
		if c.each != nil {
			c.each()
		}
	}
	return env
}

func announceFixture(t *testing.T) (*ipvstest.Fake, Env, *clock) {
	t.Helper()
	f := ipvstest.New()
	env := testEnv(t, f)
	if r := run(t, env, announceRules, "apply", "--drain-timeout", "0", "-"); r.code != exitOK {
		t.Fatalf("seeding: %+v", r)
	}
	c := &clock{now: time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)}
	return f, c.env(env), c
}

// TestWithdrawAndAnnounce: withdraw writes the withdrawal and returns once
// run's record shows the prefix withdrawn; announce removes it again.
func TestWithdrawAndAnnounce(t *testing.T) {
	_, env, c := announceFixture(t)
	a := newFakeAnnouncer(t, env, os.Getpid())
	c.each = a.take

	r := run(t, env, "", "withdraw", "10.3.0.1")
	if r.code != exitOK || !strings.Contains(r.stdout, "withdrawn 10.3.0.1/32") || strings.Contains(r.stdout, "10.3.0.2") {
		t.Fatalf("withdraw 10.3.0.1: %+v", r)
	}
	w, err := a.j.LoadWithdrawal()
	if err != nil || w == nil || w.All || len(w.Prefixes) != 1 || w.Prefixes[0] != vip1 || !w.Since.Equal(c.now.Add(-100*time.Millisecond)) {
		t.Fatalf("withdrawal %+v, %v", w, err)
	}
	if st, _ := a.j.LoadRun(); st.Announce[0].Announced || !st.Announce[1].Announced {
		t.Errorf("record after withdraw: %+v", st.Announce)
	}

	// status and top say it.
	s := run(t, env, "", "status")
	if s.code != statusWarning || !strings.Contains(s.stdout, "NOT announced 10.3.0.1/32: withdrawn by lvsctl withdraw\n") ||
		!strings.Contains(s.stdout, "announced 10.3.0.2/32 (-t 10.3.0.2:80)\n") {
		t.Errorf("status: %+v", s)
	}
	js := run(t, env, "", "status", "--json")
	var doc jsonStatus
	if err := json.Unmarshal([]byte(js.stdout), &doc); err != nil || doc.Status != "warning" || doc.Run == nil || len(doc.Run.Announce) != 2 ||
		doc.Run.Announce[0].Why != "withdrawn by lvsctl withdraw" || !doc.Run.Announce[1].Announced {
		t.Errorf("status --json: %v %+v", err, js)
	}

	r = run(t, env, "", "announce", "10.3.0.1")
	if r.code != exitOK || r.stdout != "announced 10.3.0.1/32\n" {
		t.Fatalf("announce 10.3.0.1: %+v", r)
	}
	if w, err := a.j.LoadWithdrawal(); w != nil || err != nil {
		t.Errorf("withdrawal left after announce: %+v %v", w, err)
	}
	if _, err := os.Stat(env.JournalDir + "/" + record.WithdrawalName); !os.IsNotExist(err) {
		t.Errorf("%s: %v", record.WithdrawalName, err)
	}
	if s := run(t, env, "", "status"); s.code != statusOK || !strings.Contains(s.stdout, "announced 10.3.0.1/32 (-t 10.3.0.1:80, -u 10.3.0.1:53)\n") {
		t.Errorf("status after announce: %+v", s)
	}

	// Every prefix, then every one back.
	if r := run(t, env, "", "withdraw"); r.code != exitOK || !strings.Contains(r.stdout, "withdrawn 10.3.0.1/32") || !strings.Contains(r.stdout, "withdrawn 10.3.0.2/32") {
		t.Errorf("withdraw: %+v", r)
	}
	if w, _ := a.j.LoadWithdrawal(); w == nil || !w.All {
		t.Errorf("withdraw with no prefix: %+v", w)
	}
	if r := run(t, env, "", "announce", "10.3.0.2"); r.code != exitUsage || !strings.Contains(r.stderr, "every prefix is withdrawn") {
		t.Errorf("announce one of all withdrawn: %+v", r)
	}
	if r := run(t, env, "", "announce"); r.code != exitOK || r.stdout != "announced 10.3.0.1/32\nannounced 10.3.0.2/32\n" {
		t.Errorf("announce: %+v", r)
	}
}

// TestWithdrawRefuses: bad prefixes are exit 2 and change nothing; with
// no running run the withdrawal is kept for the next one, exit 1; a run
// that does not take it is exit 1 after 10 seconds.
func TestWithdrawRefuses(t *testing.T) {
	_, env, c := announceFixture(t)
	a := newFakeAnnouncer(t, env, os.Getpid())
	for _, tc := range []struct{ arg, msg string }{
		{"10.3.0.x", `"10.3.0.x" is neither an address nor a prefix`},
		{"10.3.0.1/24", "has host bits set; the prefix is 10.3.0.0/24"},
		{"10.3.0.0/24", "announces no 10.3.0.0/24: its prefixes are 10.3.0.1/32, 10.3.0.2/32"},
	} {
		for _, cmd := range []string{"withdraw", "announce"} {
			r := run(t, env, "", cmd, tc.arg)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("%s %s: %+v", cmd, tc.arg, r)
			}
		}
	}
	if w, err := a.j.LoadWithdrawal(); w != nil || err != nil {
		t.Errorf("a refused withdraw wrote %+v %v", w, err)
	}

	// A run that never reads the file.
	start := c.now
	r := run(t, env, "", "withdraw", "10.3.0.2")
	if r.code != exitFailed || !strings.Contains(r.stderr, "did not take the change within 10s") || c.now.Sub(start) < 10*time.Second {
		t.Errorf("withdraw, run not taking it: %+v after %s", r, c.now.Sub(start))
	}

	// No run.
	a.run.PID = 0
	a.save()
	r = run(t, env, "", "withdraw", "10.3.0.1")
	if r.code != exitFailed || !strings.Contains(r.stderr, "no lvsctl run keeps this table") {
		t.Errorf("withdraw without a run: %+v", r)
	}
	if w, _ := a.j.LoadWithdrawal(); w == nil || len(w.Prefixes) != 2 {
		t.Errorf("withdrawal without a run not kept: %+v", w)
	}
}

// TestWithdrawWait: --wait returns once the services' connection counter
// stopped growing for --quiet, and fails when it grows until --wait.
func TestWithdrawWait(t *testing.T) {
	f, env, c := announceFixture(t)
	a := newFakeAnnouncer(t, env, os.Getpid())
	conns, until := uint64(0), time.Time{}
	c.each = func() {
		a.take()
		if c.now.Before(until) {
			conns++
			if err := f.SetServiceStats(web1, ipvs.Stats{Conns: conns}); err != nil {
				t.Error(err)
			}
		}
	}

	// New connections for 5 more seconds, then none: moved 3s after the last.
	until = c.now.Add(5 * time.Second)
	start := c.now
	r := run(t, env, "", "withdraw", "--wait", "1m", "--quiet", "3s", "10.3.0.1")
	if r.code != exitOK || !strings.Contains(r.stdout, "moved: no new connection for 3s") {
		t.Fatalf("withdraw --wait: %+v", r)
	}
	if took := c.now.Sub(start); took < 7*time.Second || took > 9*time.Second {
		t.Errorf("withdraw --wait returned after %s", took)
	}
	if conns < 4 {
		t.Errorf("the connections never grew: %d", conns)
	}

	// They keep coming.
	until = c.now.Add(time.Hour)
	start = c.now
	r = run(t, env, "", "withdraw", "--wait", "20s", "--quiet", "3s", "10.3.0.1")
	if r.code != exitFailed || !strings.Contains(r.stderr, "new connections still arrive after 20s (services -t 10.3.0.1:80, -u 10.3.0.1:53)") {
		t.Errorf("withdraw --wait, connections arriving: %+v", r)
	}
	if took := c.now.Sub(start); took < 20*time.Second || took > 22*time.Second {
		t.Errorf("withdraw --wait gave up after %s", took)
	}
}

// TestTopShowsTheAnnouncement: top's batch and JSON frames say what run's
// record announces.
func TestTopShowsTheAnnouncement(t *testing.T) {
	_, env, _ := announceFixture(t)
	env.Now = time.Now
	a := newFakeAnnouncer(t, env, os.Getpid())
	a.run.Announce[1].Announced, a.run.Announce[1].Why = false, "withdrawn by lvsctl withdraw"
	a.save()
	r := run(t, env, "", "top", "-b", "-n", "1")
	first, _, _ := strings.Cut(r.stdout, "\n")
	if r.code != exitOK || !strings.Contains(first, "  announced 1/2 (10.3.0.2/32 withdrawn by lvsctl withdraw)  ") {
		t.Errorf("top -b: %+v", r)
	}
	r = run(t, env, "", "top", "--json", "-n", "1")
	var f struct {
		Announce []record.Announcement `json:"announce"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &f); err != nil || len(f.Announce) != 2 || !f.Announce[0].Announced ||
		f.Announce[1].Why != "withdrawn by lvsctl withdraw" || strings.Join(f.Announce[0].Services, ", ") != "-t 10.3.0.1:80, -u 10.3.0.1:53" {
		t.Errorf("top --json (%v): %+v", err, r)
	}
}
