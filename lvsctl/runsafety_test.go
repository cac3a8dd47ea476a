package lvsctl

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/lvsctl/record"
)

// reloadWatching writes doc to h's file and reloads, in a synctest
// bubble, failing at the first change of the table from then until 300 ms
// after the reload that leaves rs1 not at weight w1 or rs2 not at w2. It
// returns the log the reload wrote.
func (h *runHarness) reloadWatching(t *testing.T, doc string, w1, w2 uint32) string {
	t.Helper()
	return h.reloadSampling(t, doc, func(w map[string]uint32) bool { return w[rs1] == w1 && w[rs2] == w2 })
}

// reloadSampling is reloadWatching with a condition of its own on each
// table.
func (h *runHarness) reloadSampling(t *testing.T, doc string, ok func(map[string]uint32) bool) string {
	t.Helper()
	synctest.Wait()
	before := len(h.stderr.String())
	if err := os.WriteFile(h.file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	stop := h.c.watchTable(t, "during the reload", ok)
	defer stop()
	h.reload <- unix.SIGHUP
	synctest.Wait()
	if log := h.stderr.String()[before:]; !strings.Contains(log, "reloaded") && !strings.Contains(log, "reload refused") {
		t.Fatalf("no reload logged:\n%s", log)
	}
	// 300 ms more: the checker has its new targets, whose first probes
	// come within an interval (240 ms at most here), and run acts on them.
	time.Sleep(300 * time.Millisecond)
	synctest.Wait()
	if w := h.c.weights(t); !ok(w) {
		t.Fatalf("after the reload: %v\n%s", w, h.stderr.String()[before:])
	}
	return h.stderr.String()[before:]
}

// TestRunCheckEditsKeepHealth: an edit of a check (interval, timeout,
// type, path, expect, port, via, rise and fall) changes its target's key,
// yet the healthy real server never leaves service and the failed one
// never comes back, through the reload and after it.
func TestRunCheckEditsKeepHealth(t *testing.T) { synctest.Test(t, testRunCheckEditsKeepHealth) }

func testRunCheckEditsKeepHealth(t *testing.T) {
	f, env, file := runFixture(t)
	h := startRun(t, f, file, env, ip2)
	defer h.stop(t)
	h.probedSinceStart(t, 1, ip1)
	h.probedSinceStart(t, 2, ip2)
	h.expect(t, "rs1 in, rs2 out", func(w map[string]uint32) bool { return w[rs1] == 3 && w[rs2] == 0 })
	h.logHas(t, rs2+" unknown -> down")
	const old = "check: {type: tcp, interval: 200ms, timeout: 100ms, rise: 2, fall: 2}"
	for _, check := range []string{
		"check: {type: tcp, interval: 240ms, timeout: 100ms, rise: 2, fall: 2}",
		"check: {type: tcp, interval: 240ms, timeout: 150ms, rise: 2, fall: 2}",
		"check: {type: http, path: /healthz, interval: 240ms, timeout: 150ms, rise: 2, fall: 2}",
		"check: {type: http, path: /ping, expect: \"204\", interval: 240ms, timeout: 150ms, rise: 2, fall: 2}",
		"check: {type: tcp, port: 8080, interval: 240ms, timeout: 150ms, rise: 2, fall: 2}",
		"check: {type: tcp, via: vip, interval: 240ms, timeout: 150ms, rise: 2, fall: 2}",
		"check: {type: tcp, interval: 240ms, timeout: 150ms, rise: 3, fall: 4}",
		old,
	} {
		doc := strings.Replace(runYAML, old, check, 1)
		log := h.reloadWatching(t, doc, 3, 0)
		if !strings.Contains(log, "reloaded") {
			t.Fatalf("%s: the reload did not take effect:\n%s", check, log)
		}
	}
	// The failed server still needs rise passes of the check it has now.
	h.probes.set(ip2, false)
	h.probed(t, 1, ip2)
	h.expect(t, "rs2 after one pass", func(w map[string]uint32) bool { return w[rs2] == 0 && w[rs1] == 3 })
	h.probed(t, 1, ip2)
	h.expect(t, "rs2 back", func(w map[string]uint32) bool { return w[rs2] == 1 && w[rs1] == 3 })
}

// TestRunRestartWithAnEditedCheck: a run restarted on a file whose check
// changed starts each real server from its recorded state: the failed one
// stays out until it passes, the healthy one never leaves.
func TestRunRestartWithAnEditedCheck(t *testing.T) { synctest.Test(t, testRunRestartWithAnEditedCheck) }

func testRunRestartWithAnEditedCheck(t *testing.T) {
	f, env, file := runFixture(t)
	h := startRun(t, f, file, env, ip2)
	h.probedSinceStart(t, 1, ip1)
	h.probedSinceStart(t, 2, ip2)
	h.expect(t, "rs1 in, rs2 out", func(w map[string]uint32) bool { return w[rs1] == 3 && w[rs2] == 0 })
	h.logHas(t, rs2+" unknown -> down")
	h.stop(t)
	// Someone set the healthy server's weight to 0 meanwhile: the record,
	// not the kernel's weight, says it is up.
	svc := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 80}
	d := ipvs.Destination{Family: ipvs.AFInet, Addr: netip.MustParseAddr("192.168.1.1"), Port: 80, FwdMethod: ipvs.FwdMasq}
	if err := f.Exec(ipvs.Request{Cmd: ipvs.CmdSetDest, Service: &svc, Dest: &d}); err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(runYAML, "interval: 200ms", "interval: 300ms", 1)
	if err := os.WriteFile(file, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	h2 := startRun(t, f, file, env)
	defer h2.stop(t)
	if w := h2.c.weights(t); w[rs1] != 3 || w[rs2] != 0 {
		t.Fatalf("right after the restart: %v; want rs1 in and rs2 still out", w)
	}
	h2.probes.set(ip2, false)
	h2.probedSinceStart(t, 1, ip2)
	h2.expect(t, "rs2 after one pass", func(w map[string]uint32) bool { return w[rs2] == 0 && w[rs1] == 3 })
	h2.probed(t, 1, ip2)
	h2.expect(t, "rs2 back after rise", func(w map[string]uint32) bool { return w[rs2] == 1 && w[rs1] == 3 })
	if log := h2.stderr.String(); !strings.Contains(log, rs2+" down -> up") {
		t.Errorf("rs2 came back without starting from its recorded state, down:\n%s", log)
	}
}

// TestRunReloadIsAnApply: a reload that takes out more than --max-delete
// of the table, or holds no service, or that the kernel refuses, is
// refused with apply's message; the table and the checks stay, run stays
// up, and status says why until a reload takes effect.
func TestRunReloadIsAnApply(t *testing.T) { synctest.Test(t, testRunReloadIsAnApply) }

func testRunReloadIsAnApply(t *testing.T) {
	f, env, file := runFixture(t)
	h := startRun(t, f, file, env)
	defer h.stop(t)
	h.probedSinceStart(t, 1, ip1, ip2)
	h.expect(t, "first passes", func(w map[string]uint32) bool { return w[rs1] == 3 && w[rs2] == 1 })

	noDests := strings.SplitAfter(runYAML, "    destinations:")[0] + " []\n"
	log := h.reloadWatching(t, noDests, 3, 1)
	want := "reload refused, the table and checks stay as they were: the plan takes out 2 of the kernel's 2 real servers (100%), more than --max-delete 50%"
	if !strings.Contains(log, want) {
		t.Errorf("a reload without real servers:\n%s\nwant %q", log, want)
	}
	st := statusOf(t, env)
	if st.code != statusWarning || !strings.Contains(st.stdout, "last reload REFUSED") || !strings.Contains(st.stdout, "--max-delete 50%") {
		t.Errorf("status after a refused reload: %+v", st)
	}

	log = h.reloadWatching(t, "version: 2\nservices: []\n", 3, 1)
	if !strings.Contains(log, "holds no service: applied, it would delete every service") {
		t.Errorf("a reload of a file without services:\n%s", log)
	}

	// The kernel refuses the new service: nothing of the file stays.
	added := runYAML + `  - protocol: tcp
    address: 10.0.0.2
    port: 80
    scheduler: wrr
    destinations:
      - {address: 192.168.1.9, port: 80, method: masq, weight: 1}
`
	h.c.mu.Lock()
	f.FailNext(ipvs.CmdNewService, unix.EINVAL)
	h.c.mu.Unlock()
	// The edit of rs1 may reach the kernel before the refusal comes back
	// (the changes are pipelined); it is undone, and no server leaves.
	log = h.reloadSampling(t, strings.Replace(added, "weight: 3}", "weight: 4}", 1), func(w map[string]uint32) bool {
		return (w[rs1] == 3 || w[rs1] == 4) && w[rs2] == 1
	})
	if !strings.Contains(log, "reload refused, the table and checks stay as they were: the kernel refused 2 changes; add-service -t 10.0.0.2:80: ipvs NEW_SERVICE: invalid argument") {
		t.Errorf("a reload the kernel refuses:\n%s", log)
	}
	if w := h.c.weights(t); len(w) != 2 || w[rs1] != 3 {
		t.Errorf("after the refused reload the table holds %v, want the running file's", w)
	}

	// A good file takes effect, and status forgets the refusal.
	h.reloadWatching(t, added, 3, 1)
	h.expect(t, "the new service", func(w map[string]uint32) bool { return w["-t 10.0.0.2:80 -r 192.168.1.9:80"] == 1 })
	// In the bubble no probe runs late: status is OK.
	if st := statusOf(t, env); strings.Contains(st.stdout, "REFUSED") || st.code != statusOK {
		t.Errorf("status after a reload that took effect: %+v", st)
	}
}

// TestRunFirstStartGuard: the first start of a run is an apply too: a
// file that takes out most of the kernel's table is refused, exit 2, the
// table as it was.
func TestRunFirstStartGuard(t *testing.T) {
	f, env, file := runFixture(t)
	if r := run(t, env, strings.Join([]string{
		"-A -t 10.0.0.9:80 -s rr",
		"-a -t 10.0.0.9:80 -r 192.168.9.1:80 -m",
		"-a -t 10.0.0.9:80 -r 192.168.9.2:80 -m",
		"-a -t 10.0.0.9:80 -r 192.168.9.3:80 -m", ""}, "\n"), "apply", "-"); r.code != exitOK {
		t.Fatalf("apply: %+v", r)
	}
	env.Probe = (&fakeProbes{down: map[string]bool{}}).probe
	var out, errOut syncBuffer
	code := Main([]string{"lvsctl", "run", file}, nil, &out, &errOut, env)
	if code != exitUsage || !strings.Contains(errOut.String(), "the plan takes out 3 of the kernel's 3 real servers (100%), more than --max-delete 50%") {
		t.Errorf("run on a file without the kernel's services: %d\n%s", code, errOut.String())
	}
	if w := (lockedClient{mu: new(sync.Mutex), f: f}).weights(t); len(w) != 3 {
		t.Errorf("the refused start changed the table: %v", w)
	}
}

// statusOf is lvsctl status in env.
func statusOf(t *testing.T, env Env) result {
	t.Helper()
	return run(t, env, "", "status")
}

// logHas fails the test unless run's log holds line.
func (h *runHarness) logHas(t *testing.T, line string) {
	t.Helper()
	if !strings.Contains(h.stderr.String(), line) {
		t.Fatalf("no %q in run's log:\n%s", line, h.stderr.String())
	}
}

// TestRunMetricsListenBeforeTheTable: an address run cannot listen on
// fails the start before the first change to the table.
func TestRunMetricsListenBeforeTheTable(t *testing.T) {
	f, env, file := runFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	env.Probe = (&fakeProbes{down: map[string]bool{}}).probe
	r := run(t, env, "", "run", "--metrics-listen", ln.Addr().String(), file)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--metrics-listen") {
		t.Errorf("run on a taken address: %+v", r)
	}
	if svcs, _ := f.Services(); len(svcs) != 0 {
		t.Errorf("the failed start changed the table: %d services", len(svcs))
	}
}

// TestStatusVerdict: status's exit status, as monitoring plugins read it.
func TestStatusVerdict(t *testing.T) {
	live := func(mod func(*record.Run)) *record.Run {
		st := &record.Run{PID: os.Getpid(), Servers: []record.Server{{InService: true}, {InService: true}}}
		if mod != nil {
			mod(st)
		}
		return st
	}
	for _, tc := range []struct {
		name   string
		st     *record.Run
		drains int
		want   int
	}{
		{"no run, no drain", nil, 0, statusOK},
		{"all announced", live(func(st *record.Run) { st.Announce = []record.Announcement{{Announced: true}} }), 0, statusOK},
		{"a prefix not announced", live(func(st *record.Run) {
			st.Announce = []record.Announcement{{Announced: true}, {Why: "withdrawn by lvsctl withdraw"}}
		}), 0, statusWarning},
		{"all down and not announced", live(func(st *record.Run) {
			st.AllDown, st.Announce = []string{"-t 10.0.0.1:80"}, []record.Announcement{{Why: "no real server in service"}}
		}), 0, statusCritical},
		{"all in service", live(nil), 0, statusOK},
		{"a drain pending", nil, 1, statusWarning},
		{"one held out", live(func(st *record.Run) { st.Servers[1].InService = false }), 0, statusWarning},
		{"reload refused", live(func(st *record.Run) { st.Refused = "the plan takes out" }), 0, statusWarning},
		{"probes late", live(func(st *record.Run) { st.Late = true }), 0, statusWarning},
		{"run stopped", live(func(st *record.Run) { st.PID = 0 }), 0, statusWarning},
		{"all down", live(func(st *record.Run) { st.AllDown = []string{"-t 10.0.0.1:80"} }), 1, statusCritical},
	} {
		if got, _ := statusVerdict(tc.st, tc.drains); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}
	// A command-line mistake is unknown to a monitoring system, not
	// critical.
	_, env, _ := runFixture(t)
	if r := run(t, env, "", "status", "--no-such-flag"); r.code != statusUnknown || !strings.Contains(r.stderr, "lvsctl status --help") {
		t.Errorf("status --no-such-flag: %+v", r)
	}
}
