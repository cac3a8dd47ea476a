package lvsctl

import (
	"bufio"
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvs/ipvstest"
	"github.com/lvskit/lvskit/lvsctl/record"
	"github.com/lvskit/lvskit/rules"
)

// keepOpen hands the fake to Run, which closes its client.
type keepOpen struct{ *ipvstest.Fake }

func (keepOpen) Close() error { return nil }

type result struct {
	code           int
	stdout, stderr string
}

func testEnv(t testing.TB, f *ipvstest.Fake) Env {
	t.Helper()
	return Env{
		Open:       func() (ipvs.Client, error) { return keepOpen{f}, nil },
		JournalDir: filepath.Join(t.TempDir(), "journal"),
		ConnFile:   filepath.Join(t.TempDir(), "no-conn-file"),
		Sysctl:     func(string) (string, error) { return "0", nil },
		Modules:    fakeModules,
	}
}

// fakeModules has the modules of the fake kernel's schedulers and the
// sip persistence engine.
func fakeModules(name string) (bool, error) {
	if name == "ip_vs_pe_sip" {
		return true, nil
	}
	for _, s := range ipvstest.DefaultSchedulers {
		if name == "ip_vs_"+s {
			return true, nil
		}
	}
	return false, nil
}

func run(t *testing.T, env Env, stdin string, args ...string) result {
	t.Helper()
	var out, errb strings.Builder
	code := Main(append([]string{"lvsctl"}, args...), strings.NewReader(stdin), &out, &errb, env)
	return result{code, out.String(), errb.String()}
}

// seed loads rules text into the fake through apply itself, checked.
const seedRules = `-A -t 10.0.0.1:80 -s wrr
-a -t 10.0.0.1:80 -r 192.168.1.1:80 -m -w 3
-a -t 10.0.0.1:80 -r 192.168.1.2:80 -m -w 1
-A -u 10.0.0.2:53 -s mh -b mh-port
-a -u 10.0.0.2:53 -r 192.168.1.3:53 -g -w 1
-a -u 10.0.0.2:53 -r 192.168.1.4:53 -g -w 1
-A -f 7 -6 -s rr -p 600 -M 64
-a -f 7 -6 -r [2001:db8::10]:0 -g -w 2
`

func seeded(t *testing.T) (*ipvstest.Fake, Env) {
	t.Helper()
	f := ipvstest.New()
	env := testEnv(t, f)
	if r := run(t, env, seedRules, "apply", "--drain-timeout", "0", "-"); r.code != exitOK {
		t.Fatalf("seeding: %+v", r)
	}
	return f, env
}

func TestListJSONRoundTripIsInSync(t *testing.T) {
	_, env := seeded(t)
	l := run(t, env, "", "list", "--json", "--stats", "--rate")
	if l.code != 0 || l.stderr != "" {
		t.Fatalf("list --json: %+v", l)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(l.stdout), &doc); err != nil {
		t.Fatalf("list --json is not JSON: %v\n%s", err, l.stdout)
	}
	for _, want := range []string{`"fwmark": 7`, `"family": "inet6"`, `"scheduler_flags": [` + "\n        \"mh-port\"", `"address": "2001:db8::10"`, `"in_bytes": 0`, `"conns_per_second": 0`} {
		if !strings.Contains(l.stdout, want) {
			t.Errorf("list --json lacks %s:\n%s", want, l.stdout)
		}
	}
	p := run(t, env, l.stdout, "plan", "-")
	if p.code != exitOK || !strings.Contains(p.stdout, "in sync") {
		t.Fatalf("plan of list --json: %+v", p)
	}
	a := run(t, env, l.stdout, "apply", "-")
	if a.code != exitOK || !strings.Contains(a.stdout, "in sync, no changes") {
		t.Fatalf("apply of list --json: %+v", a)
	}
}

func TestPlanShowsEditsAndExitStatus(t *testing.T) {
	_, env := seeded(t)
	changed := strings.Replace(seedRules, "-s wrr", "-s wlc", 1)
	changed = strings.Replace(changed, "192.168.1.1:80 -m -w 3", "192.168.1.1:80 -m -w 5", 1)
	changed = strings.Replace(changed, "-a -t 10.0.0.1:80 -r 192.168.1.2:80 -m -w 1\n", "", 1)
	p := run(t, env, changed, "plan", "-")
	if p.code != exitChanges {
		t.Fatalf("plan: status %d, want %d: %+v", p.code, exitChanges, p)
	}
	for _, want := range []string{"edit-service", "wrr -> wlc", "edit-dest", "3 -> 5", "delete-dest", "192.168.1.2:80", "3 changes"} {
		if !strings.Contains(p.stdout, want) {
			t.Errorf("plan lacks %q:\n%s", want, p.stdout)
		}
	}
	// A live scheduler change refuses new connections for a moment in the
	// kernel (docs/lvsctl.md): the plan says so, for people and programs.
	const schedWarning = "warning: -t 10.0.0.1:80: scheduler wrr -> wlc: the kernel swaps schedulers"
	if !strings.Contains(p.stdout, schedWarning) {
		t.Errorf("plan does not warn of the scheduler change:\n%s", p.stdout)
	}
	j := run(t, env, changed, "plan", "--json", "-")
	var doc struct {
		InSync  bool `json:"in_sync"`
		Changes []struct {
			Action string `json:"action"`
			Fields []struct{ Field, Old, New string }
		} `json:"changes"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(j.stdout), &doc); err != nil || doc.InSync || len(doc.Changes) != 3 {
		t.Fatalf("plan --json: %v %+v\n%s", err, doc, j.stdout)
	}
	if len(doc.Warnings) != 1 || !strings.Contains("warning: "+doc.Warnings[0], schedWarning) {
		t.Errorf("plan --json warnings: %q, want the scheduler change's alone", doc.Warnings)
	}
	// Weights alone change without that window: no warning.
	weights := strings.Replace(seedRules, "192.168.1.1:80 -m -w 3", "192.168.1.1:80 -m -w 5", 1)
	if w := run(t, env, weights, "plan", "-"); w.code != exitChanges || strings.Contains(w.stdout, "warning") {
		t.Errorf("plan of a weight edit: %+v", w)
	}
	if d := run(t, env, changed, "apply", "--dry-run", "-"); d.code != exitChanges || d.stdout != p.stdout {
		t.Errorf("apply --dry-run differs from plan: %+v", d)
	}
}

func TestBadFileChangesNothing(t *testing.T) {
	f, env := seeded(t)
	before := run(t, env, "", "list", "--json").stdout
	for _, tc := range []struct{ text, want string }{
		{"-A -t 10.0.0.9:80 -s rr\n-a -t 10.0.0.9:80 -r 1.2.3.4:80 -w 99999999999\n", "<stdin>:2: illegal weight specified"},
		{"-A -t 10.0.0.9:80\n\n-A -t 10.0.0.9:80 -s rr\n", "<stdin>:3: service -t 10.0.0.9:80 given again (first at <stdin>:1)"},
		{"-A -t 10.0.0.9:80\n-a -t 10.0.0.9:80 -r 1.2.3.4\n-a -t 10.0.0.9:80 -r 1.2.3.4 -w 2\n", "<stdin>:3: destination 1.2.3.4:80 of -t 10.0.0.9:80 given again (first at <stdin>:2)"},
		{"-a -t 10.0.0.9:80 -r 1.2.3.4\n", "<stdin>:1: destination of service -t 10.0.0.9:80, which no earlier -A line defines"},
		{"-C\n", "<stdin>:1: only -A (add service) and -a (add server) lines describe a rule set, not flush"},
		{"-A -t 10.0.0.9:80\x00\n", "<stdin>:1: NUL byte"},
		{"{\"version\": 1, \"services\": [\n {\"protocol\": \"tcp\", \"address\": \"10.0.0.9\", \"port\": 80, \"family\": \"inet\", \"scheduler\": \"rr\",\n  \"destinations\": [\n   {\"address\": \"1.2.3.4\", \"port\": 80, \"method\": \"masq\", \"weight\": 1},\n   {\"address\": \"1.2.3.4\", \"port\": 80, \"method\": \"masq\", \"weight\": 2}]}]}\n",
			"<stdin>:5: destination 1.2.3.4:80 of -t 10.0.0.9:80 given again (first at <stdin>:4)"},
		{"{\"version\": 1, \"services\": [\n {\"protocol\": \"tcp\", \"address\": \"10.0.0.9\", \"port\": 80, \"family\": \"inet\", \"scheduler\": \"rr\", \"destinations\": [],\n  \"bogus\": 1}]}\n", "<stdin>:3: unknown field \"bogus\" (/usr/share/doc/lvskit/lvsctl.md lists them)"},
	} {
		r := run(t, env, tc.text, "apply", "-")
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("apply of %q: status %d, stderr %q; want status 2 and %q", tc.text, r.code, r.stderr, tc.want)
		}
	}
	if after := run(t, env, "", "list", "--json").stdout; after != before {
		t.Errorf("a refused file changed the table:\n%s", after)
	}
	_ = f
}

// TestInterruptedDrainIsFinishedByTheNextApply: a drain stopped by a
// signal leaves weight 0 and a journal; status shows it; the next apply
// finishes it; nothing stays at weight 0.
func TestInterruptedDrainIsFinishedByTheNextApply(t *testing.T) {
	f, env := seeded(t)
	svc := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoUDP, Addr: mustAddr("10.0.0.2"), Port: 53}
	leaving := ipvs.Destination{Family: ipvs.AFInet, Addr: mustAddr("192.168.1.4"), Port: 53}
	if err := f.SetDestinationCounters(svc, leaving, ipvs.DestCounters{InactConns: 4}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	env.Context = ctx
	var polls int
	env.Now = func() time.Time {
		polls++
		if polls > 6 {
			cancel() // the "signal", after the drain started
		}
		return time.Unix(1e9, 0)
	}
	without := strings.Replace(seedRules, "-a -u 10.0.0.2:53 -r 192.168.1.4:53 -g -w 1\n", "", 1)
	r := run(t, env, without, "apply", "-")
	if r.code != exitInterrupted || !strings.Contains(r.stdout, "interrupted: 1 real server still draining") {
		t.Fatalf("interrupted apply: %+v", r)
	}
	ds, _ := f.Destinations(svc)
	var found bool
	for _, d := range ds {
		if d.Addr == leaving.Addr {
			found = true
			if d.Weight != 0 {
				t.Errorf("draining server has weight %d, want 0", d.Weight)
			}
		}
	}
	if !found {
		t.Fatal("the draining server was deleted although connections remained")
	}
	if s, _ := f.Service(svc); s.Flags&ipvs.FlagSched1 == 0 {
		t.Errorf("mh service without mh-fallback during its drain: flags %#x", s.Flags)
	}
	env.Context, env.Now = context.Background(), nil
	st := run(t, env, "", "status")
	if st.code != statusWarning || !strings.Contains(st.stdout, "192.168.1.4:53") || !strings.Contains(st.stdout, "drain, keep service") {
		t.Fatalf("status: %+v", st)
	}
	// The connections end; the next apply finishes the drain.
	if err := f.SetDestinationCounters(svc, leaving, ipvs.DestCounters{}); err != nil {
		t.Fatal(err)
	}
	r = run(t, env, without, "apply", "-")
	if r.code != exitOK || !strings.Contains(r.stdout, "journal: resuming -u 10.0.0.2:53 -r 192.168.1.4:53 (weight 1") {
		t.Fatalf("second apply: %+v", r)
	}
	if s, _ := f.Service(svc); s.Flags&ipvs.FlagSched1 != 0 {
		t.Errorf("mh-fallback left on after the drain: flags %#x", s.Flags)
	}
	if st := run(t, env, "", "status"); st.code != exitOK || !strings.Contains(st.stdout, "no drain pending") {
		t.Errorf("status after: %+v", st)
	}
	if p := run(t, env, without, "plan", "-"); p.code != exitOK {
		t.Errorf("plan after: %+v", p)
	}
}

// TestInterruptedDrainCancelledWhenTheFileKeepsTheServer: the next apply of
// a file that keeps the server puts its weight back.
func TestInterruptedDrainCancelledWhenTheFileKeepsTheServer(t *testing.T) {
	f, env := seeded(t)
	svc := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: mustAddr("10.0.0.1"), Port: 80}
	d := ipvs.Destination{Family: ipvs.AFInet, Addr: mustAddr("192.168.1.1"), Port: 80}
	if err := f.SetDestinationCounters(svc, d, ipvs.DestCounters{ActiveConns: 2}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	env.Context = ctx
	without := strings.Replace(seedRules, "-a -t 10.0.0.1:80 -r 192.168.1.1:80 -m -w 3\n", "", 1)
	if r := run(t, env, without, "apply", "-"); r.code != exitInterrupted {
		t.Fatalf("interrupted apply: %+v", r)
	}
	env.Context = context.Background()
	r := run(t, env, seedRules, "apply", "-")
	if r.code != exitOK || !strings.Contains(r.stdout, "edit-dest -t 10.0.0.1:80 -r 192.168.1.1:80 weight 0->3") {
		t.Fatalf("cancelling apply: %+v", r)
	}
	if st := run(t, env, "", "status"); st.code != exitOK {
		t.Errorf("status after cancel: %+v", st)
	}
}

func TestDeletedByHandIsRecreated(t *testing.T) {
	f, env := seeded(t)
	svc := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: mustAddr("10.0.0.1"), Port: 80}
	if err := f.Exec(ipvs.Request{Cmd: ipvs.CmdDelService, Service: &svc}); err != nil {
		t.Fatal(err)
	}
	if r := run(t, env, seedRules, "apply", "-"); r.code != exitOK || !strings.Contains(r.stdout, "add-service -t 10.0.0.1:80") {
		t.Fatalf("apply: %+v", r)
	}
	if p := run(t, env, seedRules, "plan", "-"); p.code != exitOK {
		t.Fatalf("plan: %+v", p)
	}
}

func TestJournalRefusesUntrustedState(t *testing.T) {
	f := ipvstest.New()
	env := testEnv(t, f)
	dir := env.JournalDir
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if r := run(t, env, seedRules, "apply", "-"); r.code != exitFailed || !strings.Contains(r.stderr, "lets others in") {
		t.Errorf("world-writable journal directory: %+v", r)
	}
	os.Chmod(dir, 0o700)
	target := filepath.Join(t.TempDir(), "elsewhere")
	os.WriteFile(target, []byte(`{"version":1}`), 0o600)
	if err := os.Symlink(target, filepath.Join(dir, record.JournalName)); err != nil {
		t.Fatal(err)
	}
	if r := run(t, env, seedRules, "apply", "-"); r.code != exitFailed || !strings.Contains(r.stderr, "journal") {
		t.Errorf("journal that is a symbolic link: %+v", r)
	}
	os.Remove(filepath.Join(dir, record.JournalName))
	os.WriteFile(filepath.Join(dir, record.JournalName), []byte(`{"version":1}`), 0o666)
	os.Chmod(filepath.Join(dir, record.JournalName), 0o666)
	if r := run(t, env, seedRules, "apply", "-"); r.code != exitFailed || !strings.Contains(r.stderr, "lets others in") {
		t.Errorf("world-writable journal: %+v", r)
	}
	os.Remove(filepath.Join(dir, record.JournalName))
	linkDir := filepath.Join(t.TempDir(), "link")
	os.Symlink(dir, linkDir)
	env.JournalDir = linkDir
	if r := run(t, env, seedRules, "apply", "-"); r.code != exitFailed {
		t.Errorf("journal directory that is a symbolic link: %+v", r)
	}
}

func TestLiveConnsReadsTheConnectionTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ip_vs_conn")
	os.WriteFile(path, []byte(`Pro FromIP   FPrt ToIP     TPrt DestIP   DPrt State       Expires PEName PEData
TCP 0A000001 8F2C 0A000064 0050 C0A80102 0050 ESTABLISHED     899
TCP 0A000001 8F2D 0A000064 0050 C0A80102 0050 TIME_WAIT       119
TCP 0A000001 8F2E 0A000064 0050 C0A80103 0050 CLOSE             9
UDP 0A000001 8F2F 0A000064 0035 C0A80103 0035 UDP             299
IP  0A000001 0000 0A000064 0050 C0A80103 0050 NONE            299
TCP 2001:0db8:0000:0000:0000:0000:0000:0001 8F2C 2001:0db8:0000:0000:0000:0000:0000:0064 0050 2001:0db8:0000:0000:0000:0000:0000:0010 0050 SYN_RECV 59
`), 0o600)
	live, err := liveConns(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"192.168.1.2:80": 1, "192.168.1.3:53": 1, "[2001:db8::10]:80": 1}
	if len(live) != len(want) {
		t.Errorf("live %v, want %v", live, want)
	}
	for k, n := range live {
		if want[k.String()] != n {
			t.Errorf("live[%s] = %d, want %d", k, n, want[k.String()])
		}
	}
	_ = rules.DestKey{}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// TestMHOrderFollowsTheFile: for mh services the destination list order
// decides the lookup table. Rules text gives the canonical order; a JSON
// document gives its own order (list --json writes the kernel's), so
// applying either on two directors builds the same list.
func TestMHOrderFollowsTheFile(t *testing.T) {
	f := ipvstest.New()
	env := testEnv(t, f)
	doc := `{"version": 1, "services": [{"protocol": "udp", "address": "10.0.0.2", "port": 53, "family": "inet", "scheduler": "mh",
  "destinations": [{"address": "192.168.1.4", "port": 53, "method": "route", "weight": 1},
                   {"address": "192.168.1.3", "port": 53, "method": "route", "weight": 1}]}]}`
	if r := run(t, env, doc, "apply", "-"); r.code != exitOK {
		t.Fatalf("apply JSON: %+v", r)
	}
	svc := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoUDP, Addr: mustAddr("10.0.0.2"), Port: 53}
	order := func() string {
		ds, _ := f.Destinations(svc)
		var s []string
		for _, d := range ds {
			s = append(s, d.Addr.String())
		}
		return strings.Join(s, " ")
	}
	if got := order(); got != "192.168.1.4 192.168.1.3" {
		t.Fatalf("after the JSON apply the kernel lists %s, want the document's order", got)
	}
	l := run(t, env, "", "list", "--json")
	if strings.Index(l.stdout, "192.168.1.4") > strings.Index(l.stdout, "192.168.1.3") {
		t.Errorf("list --json does not show the kernel's mh order:\n%s", l.stdout)
	}
	if p := run(t, env, l.stdout, "plan", "-"); p.code != exitOK {
		t.Errorf("plan of list --json: %+v", p)
	}
	text := "-A -u 10.0.0.2:53 -s mh\n-a -u 10.0.0.2:53 -r 192.168.1.4:53 -g -w 1\n-a -u 10.0.0.2:53 -r 192.168.1.3:53 -g -w 1\n"
	p := run(t, env, text, "plan", "-")
	if p.code != exitChanges || !strings.Contains(p.stdout, "re-add-dest") {
		t.Fatalf("plan of rules text: %+v", p)
	}
	if r := run(t, env, text, "apply", "-"); r.code != exitOK {
		t.Fatalf("apply text: %+v", r)
	}
	if got := order(); got != "192.168.1.3 192.168.1.4" {
		t.Errorf("after the text apply the kernel lists %s, want canonical order", got)
	}
}

// TestTerminalProgressRedrawsTheDrainBlock: on a terminal the drains'
// block is redrawn in place (cursor up, clear) and finished drains leave
// one line; in a script each event is one line and polls print nothing.
func TestTerminalProgressRedrawsTheDrainBlock(t *testing.T) {
	svc := rules.ServiceKey{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: mustAddr("10.0.0.1"), Port: 80}
	dest := rules.DestKey{Family: ipvs.AFInet, Addr: mustAddr("192.168.1.2"), Port: 80}
	events := []rules.Event{
		{Kind: rules.EventDrainStart, Service: svc, Dest: dest, Left: time.Minute},
		{Kind: rules.EventDrainWait, Service: svc, Dest: dest, Active: 3, Inactive: 1, Left: 59 * time.Second},
		{Kind: rules.EventDrainDone, Service: svc, Dest: dest},
	}
	var tty strings.Builder
	live := &liveReporter{w: &tty, now: time.Now, drains: map[string]string{}}
	for _, e := range events {
		live.event(e)
	}
	out := tty.String()
	if !strings.Contains(out, "\x1b[1A\x1b[J") || !strings.Contains(out, "active 3, inactive 1, 59s left") || !strings.Contains(out, "drain-done -t 10.0.0.1:80 -r 192.168.1.2:80 deleted") {
		t.Errorf("terminal output %q", out)
	}
	var lines strings.Builder
	lr := &lineReporter{w: bufio.NewWriter(&lines)}
	for _, e := range events {
		lr.event(e)
	}
	// Drain events reach the log at once, without waiting for finish.
	if n := strings.Count(lines.String(), "\n"); n != 2 || strings.Contains(lines.String(), "\x1b") {
		t.Errorf("script output: %d lines, want 2 (start, done), no escapes: %q", n, lines.String())
	}
}

// TestReadersCreateNothing: plan and status on a host where nothing was
// ever journaled leave the journal directory uncreated.
func TestReadersCreateNothing(t *testing.T) {
	env := testEnv(t, ipvstest.New())
	if r := run(t, env, "", "status"); r.code != exitOK || !strings.Contains(r.stdout, "no drain pending") {
		t.Fatalf("status: %+v", r)
	}
	if r := run(t, env, seedRules, "plan", "-"); r.code != exitChanges || r.stderr != "" {
		t.Fatalf("plan: %+v", r)
	}
	if _, err := os.Lstat(env.JournalDir); !os.IsNotExist(err) {
		t.Errorf("plan or status created %s (%v)", env.JournalDir, err)
	}
}

// TestTableChangingUnderApply: a change refused because the table changed
// meanwhile (EEXIST: someone added it) makes apply read and plan again, and
// it converges; a refusal no re-read can fix ends in exit 1 with a report
// of what was not applied, and a re-run then converges.
func TestTableChangingUnderApply(t *testing.T) {
	f := ipvstest.New()
	env := testEnv(t, f)
	f.FailNext(ipvs.CmdNewService, unix.EEXIST)
	r := run(t, env, seedRules, "apply", "-")
	if r.code != exitOK || !strings.Contains(r.stdout, "read and planned again 1 time\n") {
		t.Fatalf("apply with a raced add: %+v", r)
	}
	if p := run(t, env, seedRules, "plan", "-"); p.code != exitOK {
		t.Fatalf("plan after: %+v", p)
	}
	changed := strings.Replace(seedRules, "-m -w 3", "-m -w 4", 1)
	f.FailNext(ipvs.CmdSetDest, unix.ENOMEM)
	r = run(t, env, changed, "apply", "-")
	if r.code != exitFailed || !strings.Contains(r.stdout, "stopped: the kernel refused 1 change; 0 other changes were made") ||
		!strings.Contains(r.stdout, "  refused: edit-dest -t 10.0.0.1:80 -r 192.168.1.1:80: ipvs SET_DEST: cannot allocate memory") ||
		!strings.Contains(r.stdout, "nothing was drained or deleted") || strings.Contains(r.stdout, "planned again") {
		t.Fatalf("apply with a refused edit: %+v", r)
	}
	if r := run(t, env, changed, "apply", "-"); r.code != exitOK {
		t.Fatalf("re-run: %+v", r)
	}
}
