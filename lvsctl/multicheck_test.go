package lvsctl

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"testing/synctest"
)

// multiCheck is runYAML with its service's check replaced by checks.
func multiCheck(checks string) string {
	return strings.Replace(runYAML, "    check: {type: tcp, interval: 200ms, timeout: 100ms, rise: 2, fall: 2}\n", checks, 1)
}

const (
	tcpCheck  = "{type: tcp, interval: 200ms, timeout: 100ms, rise: 2, fall: 2}"
	httpCheck = "{type: http, port: 8080, interval: 200ms, timeout: 100ms, rise: 2, fall: 2}"
	// the addresses the http checks probe
	ip1http = "192.168.1.1:8080"
	ip2http = "192.168.1.2:8080"
)

// TestRunSeveralChecks: a real server with a tcp and an http check serves
// only while both are up: the http check failing takes it out, and it
// comes back once both are up again, each by its own rise and fall. A
// second check added to a server in service starts up, so the reload
// keeps it in service; removing one keeps the state of the other. The log
// and status name the check that holds it out.
func TestRunSeveralChecks(t *testing.T) { synctest.Test(t, testRunSeveralChecks) }

func testRunSeveralChecks(t *testing.T) {
	f, env, file := runFixture(t)
	h := startRun(t, f, file, env)
	h.probedSinceStart(t, 1, ip1, ip2)
	h.expect(t, "first passes", func(w map[string]uint32) bool { return w[rs1] == 3 && w[rs2] == 1 })

	// An http check added to both: rs2's fails from the first, but starts
	// up as its server is, so only fall (2) failures take rs2 out.
	h.probes.set(ip2http, true)
	both := multiCheck("    checks:\n      - " + tcpCheck + "\n      - " + httpCheck + "\n")
	if err := os.WriteFile(file, []byte(both), 0o600); err != nil {
		t.Fatal(err)
	}
	h.reload <- os.Interrupt
	h.probedSinceStart(t, 1, ip2http)
	h.expect(t, "a second check added, failed once", func(w map[string]uint32) bool { return w[rs1] == 3 && w[rs2] == 1 })
	h.probed(t, 1, ip2http)
	h.expect(t, "the http check down", func(w map[string]uint32) bool { _, ok := w[rs2]; return ok && w[rs2] == 0 && w[rs1] == 3 })
	if log := h.stderr.String(); !strings.Contains(log, rs2+" up -> down (http check: connection refused)") {
		t.Errorf("the log does not name the failing check:\n%s", log)
	}
	s := run(t, env, "", "status")
	if !strings.Contains(s.stdout, "| 192.168.1.2:80 | held out   | 0 (file 1) | down  | http ") ||
		!strings.Contains(s.stdout, "| 192.168.1.2:80 | held out   | 0 (file 1) | up    | tcp ") ||
		!strings.Contains(s.stdout, "| 192.168.1.1:80 | in service | 3          | up    | http ") {
		t.Errorf("status does not show each check:\n%s", s.stdout)
	}
	js := run(t, env, "", "status", "--json")
	var doc jsonStatus
	if err := json.Unmarshal([]byte(js.stdout), &doc); err != nil || doc.Run == nil || len(doc.Run.Servers) != 2 {
		t.Fatalf("status --json: %v %+v", err, js)
	}
	for _, sv := range doc.Run.Servers {
		if len(sv.Checks) != 2 || sv.Checks[0].Check != "tcp" || sv.Checks[1].Check != "http" {
			t.Errorf("status --json: %s checks %+v", sv.Destination, sv.Checks)
		}
		if sv.Destination == "192.168.1.2:80" && (sv.Check != "http" || sv.State != "down" || sv.Checks[1].State != "down" || sv.Checks[0].State != "up") {
			t.Errorf("status --json: %+v, want held out by its http check", sv)
		}
	}

	// Back only when both are up: the http check rises while tcp falls.
	h.probes.set(ip2http, false)
	h.probes.set(ip2, true)
	h.probed(t, 2, ip2http, ip2)
	h.expect(t, "http up, tcp down", func(w map[string]uint32) bool { return w[rs2] == 0 })
	h.probes.set(ip2, false)
	h.probed(t, 1, ip2)
	h.expect(t, "tcp passed once", func(w map[string]uint32) bool { return w[rs2] == 0 })
	h.probed(t, 1, ip2)
	h.expect(t, "both up", func(w map[string]uint32) bool { return w[rs2] == 1 && w[rs1] == 3 })

	// rs2's http check down again, then the tcp check removed: the http
	// check keeps its state (rs2 stays out), and rs1 stays in service.
	h.probes.set(ip2http, true)
	h.probed(t, 2, ip2http)
	h.expect(t, "http down again", func(w map[string]uint32) bool { return w[rs2] == 0 })
	httpOnly := multiCheck("    checks:\n      - " + httpCheck + "\n")
	if err := os.WriteFile(file, []byte(httpOnly), 0o600); err != nil {
		t.Fatal(err)
	}
	h.probes.set(ip2http, false)
	h.reload <- os.Interrupt
	h.probed(t, 1, ip2http)
	h.expect(t, "the tcp check removed, http passed once", func(w map[string]uint32) bool { return w[rs2] == 0 && w[rs1] == 3 })
	h.probed(t, 1, ip2http)
	h.expect(t, "http back", func(w map[string]uint32) bool { return w[rs2] == 1 && w[rs1] == 3 })
}

// TestRunSeveralChecksDynamicWeight: a dynamic exec check's weight is the
// server's while its other checks are up too; one of them down takes the
// server out whatever the weight.
func TestRunSeveralChecksDynamicWeight(t *testing.T) {
	synctest.Test(t, testRunSeveralChecksDynamicWeight)
}

func testRunSeveralChecksDynamicWeight(t *testing.T) {
	f, env, file := runFixture(t)
	doc := multiCheck("    checks:\n      - " + httpCheck + "\n      - {type: exec, command: [/bin/true], dynamic: true, interval: 200ms, timeout: 100ms, rise: 2, fall: 2}\n")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startRun(t, f, file, env)
	h.probes.setWeight(ip1, 7) // the exec check's target is the real server
	h.probedSinceStart(t, 1, ip1, ip2, ip1http, ip2http)
	h.probed(t, 1, ip1)
	h.expect(t, "dynamic weight", func(w map[string]uint32) bool { return w[rs1] == 7 && w[rs2] == 1 })
	h.probes.set(ip1http, true)
	h.probed(t, 2, ip1http)
	h.expect(t, "http down", func(w map[string]uint32) bool { _, ok := w[rs1]; return ok && w[rs1] == 0 })
	h.probes.set(ip1http, false)
	h.probed(t, 2, ip1http)
	h.expect(t, "back at the dynamic weight", func(w map[string]uint32) bool { return w[rs1] == 7 })
}

// TestRunRestartKeepsEachCheck: a restarted run seeds each check of a real
// server from its record: the server its http check holds out stays out
// until that check rises again, the other never leaves service.
func TestRunRestartKeepsEachCheck(t *testing.T) { synctest.Test(t, testRunRestartKeepsEachCheck) }

func testRunRestartKeepsEachCheck(t *testing.T) {
	f, env, file := runFixture(t)
	if err := os.WriteFile(file, []byte(multiCheck("    checks:\n      - "+tcpCheck+"\n      - "+httpCheck+"\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startRun(t, f, file, env, ip2http)
	h.probedSinceStart(t, 1, ip1, ip1http, ip2)
	h.probedSinceStart(t, 2, ip2http)
	h.expect(t, "rs1 in, rs2 out", func(w map[string]uint32) bool { return w[rs1] == 3 && w[rs2] == 0 })
	h.stop(t)

	h2 := startRun(t, f, file, env)
	if w := h2.c.weights(t); w[rs2] != 0 || w[rs1] != 3 {
		t.Errorf("right after the restart: %v; want rs2 still out and rs1 in", w)
	}
	h2.probedSinceStart(t, 1, ip2http)
	h2.expect(t, "rs2's http check passed once", func(w map[string]uint32) bool { return w[rs2] == 0 && w[rs1] == 3 })
	h2.probed(t, 1, ip2http)
	h2.expect(t, "rs2 back after rise", func(w map[string]uint32) bool { return w[rs2] == 1 && w[rs1] == 3 })
}
